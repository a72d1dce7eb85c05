//! Who may connect: SCRAM-SHA-256 with one configured user and password (what psql, libpq,
//! psycopg and Grafana's driver all speak), or no authentication when no password is set —
//! which [`super::ServeConfig::validate`] allows on loopback addresses only.

use async_trait::async_trait;
use datafusion_postgres::pgwire::api::auth::noop::NoopStartupHandler;
use datafusion_postgres::pgwire::api::auth::sasl::SASLAuthStartupHandler;
use datafusion_postgres::pgwire::api::auth::sasl::scram::{
    SCRAM_ITERATIONS, ScramAuth, gen_salted_password, random_nonce,
};
use datafusion_postgres::pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use datafusion_postgres::pgwire::api::{ClientInfo, ConnectionManager, PgWireConnectionState};
use datafusion_postgres::pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use futures::Sink;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The one account of the server, with its password salted and hashed once at start (SCRAM
/// needs only the salted form, and 4,096 PBKDF2 rounds per connection would be wasted work).
#[derive(Debug)]
pub struct Account {
    user: String,
    salt: Vec<u8>,
    salted_password: Vec<u8>,
}

impl Account {
    pub fn new(user: &str, password: &str) -> Self {
        let salt = random_nonce().into_bytes();
        let salted_password = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
        Self {
            user: user.to_owned(),
            salt,
            salted_password,
        }
    }
}

#[async_trait]
impl AuthSource for Account {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        match login.user() {
            Some(user) if user == self.user => Ok(Password::new(
                Some(self.salt.clone()),
                self.salted_password.clone(),
            )),
            other => Err(PgWireError::InvalidPassword(
                other.unwrap_or_default().to_owned(),
            )),
        }
    }
}

/// Startup without authentication, for a loopback server with no password.
#[derive(Debug)]
pub struct Trust {
    pub connections: Arc<ConnectionManager>,
}

impl NoopStartupHandler for Trust {
    fn connection_manager(&self) -> Option<Arc<ConnectionManager>> {
        Some(Arc::clone(&self.connections))
    }
}

/// SQLSTATE 53300, `too_many_connections`, with Postgres' own wording.
pub fn too_many_connections(why: &str) -> ErrorInfo {
    ErrorInfo::new(
        "FATAL".to_owned(),
        "53300".to_owned(),
        format!("sorry, too many clients already ({why})"),
    )
}

/// A connection's places: among the connections still starting up (taken when it was
/// accepted) and, once it has logged in, among the authenticated ones (`--max-connections`).
/// Only logged-in connections count against `--max-connections`, so sockets that never finish
/// the startup cannot lock clients out.
#[derive(Debug)]
pub struct Admission {
    slots: Option<Arc<Semaphore>>,
    max: usize,
    starting: Mutex<Option<OwnedSemaphorePermit>>,
    slot: Mutex<Option<OwnedSemaphorePermit>>,
    authenticated: AtomicBool,
}

impl Admission {
    /// `slots` bounds the authenticated connections (`None`: no bound, `max` is its size);
    /// `starting` is this connection's place among those starting up.
    pub fn new(slots: Option<Arc<Semaphore>>, max: usize, starting: OwnedSemaphorePermit) -> Self {
        Self {
            slots,
            max,
            starting: Mutex::new(Some(starting)),
            slot: Mutex::new(None),
            authenticated: AtomicBool::new(false),
        }
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }

    /// Takes a place among the authenticated connections before the message that may log the
    /// client in is answered, so a full server refuses it with 53300 instead of letting it in.
    fn take_slot(&self) -> PgWireResult<()> {
        let Some(slots) = &self.slots else {
            return Ok(());
        };
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let permit = Arc::clone(slots).try_acquire_owned().map_err(|_| {
                tracing::warn!(
                    max = self.max,
                    "connection refused: --max-connections reached"
                );
                PgWireError::UserError(Box::new(too_many_connections(&format!(
                    "--max-connections {}",
                    self.max
                ))))
            })?;
            *slot = Some(permit);
        }
        Ok(())
    }

    /// After a startup message: a client that logged in gives back its place among those
    /// starting up; one that did not (yet) gives back the place it was lent.
    fn settle(&self, logged_in: bool) {
        if logged_in {
            self.authenticated.store(true, Ordering::Release);
            drop(
                self.starting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
        } else {
            drop(self.slot.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
    }
}

/// The startup handler of one connection. SCRAM keeps the exchange's state in the handler, so
/// every connection gets its own.
pub struct Startup {
    auth: Auth,
    admission: Arc<Admission>,
}

enum Auth {
    Trust(Trust),
    Scram(SASLAuthStartupHandler<DefaultServerParameterProvider>),
}

impl Startup {
    pub fn new(
        account: Option<&Arc<Account>>,
        connections: &Arc<ConnectionManager>,
        admission: Arc<Admission>,
    ) -> Self {
        let auth = match account {
            None => Auth::Trust(Trust {
                connections: Arc::clone(connections),
            }),
            Some(account) => Auth::Scram(
                SASLAuthStartupHandler::new(Arc::new(DefaultServerParameterProvider::default()))
                    .with_scram(ScramAuth::new(Arc::clone(account) as Arc<dyn AuthSource>))
                    .with_connection_manager(Arc::clone(connections)),
            ),
        };
        Self { auth, admission }
    }

    /// Whether answering `message` may complete the login: the startup message without a
    /// password, a password message with one.
    fn may_log_in(&self, message: &PgWireFrontendMessage) -> bool {
        match self.auth {
            Auth::Trust(_) => matches!(message, PgWireFrontendMessage::Startup(_)),
            Auth::Scram(_) => matches!(message, PgWireFrontendMessage::PasswordMessageFamily(_)),
        }
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if self.admission.is_authenticated() || !self.may_log_in(&message) {
            return self.answer(client, message).await;
        }
        self.admission.take_slot()?;
        let answered = self.answer(client, message).await;
        let logged_in =
            answered.is_ok() && matches!(client.state(), PgWireConnectionState::ReadyForQuery);
        self.admission.settle(logged_in);
        answered
    }
}

impl Startup {
    async fn answer<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match &self.auth {
            Auth::Trust(trust) => trust.on_startup(client, message).await,
            Auth::Scram(scram) => scram.on_startup(client, message).await,
        }
    }
}
