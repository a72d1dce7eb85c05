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
use datafusion_postgres::pgwire::api::{ClientInfo, ConnectionManager};
use datafusion_postgres::pgwire::error::{PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use futures::Sink;
use std::fmt::Debug;
use std::sync::Arc;

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

/// The startup handler of one connection. SCRAM keeps the exchange's state in the handler, so
/// every connection gets its own.
pub enum Startup {
    Trust(Trust),
    Scram(SASLAuthStartupHandler<DefaultServerParameterProvider>),
}

impl Startup {
    pub fn new(account: Option<&Arc<Account>>, connections: &Arc<ConnectionManager>) -> Self {
        match account {
            None => Startup::Trust(Trust {
                connections: Arc::clone(connections),
            }),
            Some(account) => Startup::Scram(
                SASLAuthStartupHandler::new(Arc::new(DefaultServerParameterProvider::default()))
                    .with_scram(ScramAuth::new(Arc::clone(account) as Arc<dyn AuthSource>))
                    .with_connection_manager(Arc::clone(connections)),
            ),
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
        match self {
            Startup::Trust(trust) => trust.on_startup(client, message).await,
            Startup::Scram(scram) => scram.on_startup(client, message).await,
        }
    }
}
