//! Parsers for human-written durations (`500ms`, `30s`, `5m`, humantime's forms) and sizes
//! (`512M`, `4G`) in flags.

use std::time::Duration;

/// The leading number of `text` and the unit after it.
fn number_and_unit<'a>(text: &'a str, example: &str) -> Result<(u64, &'a str), String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n = number
        .parse()
        .map_err(|_| format!("`{text}` is not a {example}"))?;
    Ok((n, unit.trim()))
}

/// A duration: humantime's forms (`500ms`, `30s`, `5m`, `1h 30m`), or a bare number of seconds.
pub fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like 500ms, 30s or 5m: {e}"))
}

pub fn bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (n, unit) = number_and_unit(text, "size like 512M or 4G")?;
    let n = usize::try_from(n).map_err(|_| format!("`{text}` is too large"))?;
    let scale: usize = match unit.trim_end_matches(['B', 'b', 'i']) {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`: use K, M, G or T"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_people_write_them() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(duration("5 fortnights").is_err());
        assert_eq!(bytes("512M"), Ok(512 << 20));
        assert_eq!(bytes("4GiB"), Ok(4 << 30));
        assert_eq!(bytes("1024"), Ok(1024));
        assert!(bytes("lots").is_err());
    }
}
