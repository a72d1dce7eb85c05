//! What kind of failure an error is, said by each crate's error type and mapped to the binary's
//! exit status in one place (GreptimeDB gives every error a status code; these are the few a
//! script driving lkplake needs to tell apart).

/// The kind of a failure, from the user's side: what to look at next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Some input could not be read or parsed; everything else was done.
    Input,
    /// What the user asked for is wrong: a flag, a value, a file it names.
    Usage,
    /// The Kafka broker does not answer, or it refused or failed a request.
    Broker,
    /// The lake cannot be opened, read or written.
    Lake,
    /// Anything else stopped the command.
    Failed,
}
