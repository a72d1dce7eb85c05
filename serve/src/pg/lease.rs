//! A statement's turn to execute (one of `--max-running`) and its deadline, held by the
//! stream of its rows for as long as rows are being pulled from it.
//!
//! Execution is lazy: a query runs while its rows are pulled. A portal of the extended
//! protocol executed with a row limit stops pulling once it has sent that many rows and waits,
//! suspended, for the client's next `Execute` (asyncpg and JDBC cursors do this). While it
//! waits it holds no turn, so idle cursors cannot lock everyone else out: the turn is given
//! back when the portal suspends and taken again, under a fresh statement timeout, when the
//! client asks for more.

use super::{Activity, Running, timed_out};
use datafusion_postgres::pgwire::error::{PgWireError, PgWireResult};
use datafusion_postgres::pgwire::messages::data::DataRow;
use futures::{Stream, StreamExt};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// What a statement holds while it runs: a running slot and its place in the connection's
/// activity (so a stopping server knows the connection is busy).
struct Turn {
    _permit: OwnedSemaphorePermit,
    _running: Arc<Running>,
}

/// A statement's right to execute, given back between the fetches of a suspended portal.
pub(super) struct Lease {
    running: Arc<Semaphore>,
    activity: Arc<Activity>,
    peer: SocketAddr,
    limit: Duration,
    state: Mutex<LeaseState>,
}

struct LeaseState {
    turn: Option<Turn>,
    deadline: Instant,
}

impl Lease {
    /// Waits for a turn within `limit`, which is also the deadline of the statement's work
    /// from now on.
    pub(super) async fn take(
        running: &Arc<Semaphore>,
        activity: &Arc<Activity>,
        peer: SocketAddr,
        limit: Duration,
    ) -> PgWireResult<Arc<Self>> {
        let lease = Arc::new(Self {
            running: Arc::clone(running),
            activity: Arc::clone(activity),
            peer,
            limit,
            state: Mutex::new(LeaseState {
                turn: None,
                deadline: Instant::now() + limit,
            }),
        });
        lease.resume().await?;
        Ok(lease)
    }

    fn state(&self) -> MutexGuard<'_, LeaseState> {
        // A poisoned lock only means a panic while swapping the turn; the state is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a turn again (if it has none), with a new deadline: the client asked a suspended
    /// portal for more rows.
    pub(super) async fn resume(&self) -> PgWireResult<()> {
        if self.state().turn.is_some() {
            return Ok(());
        }
        let deadline = Instant::now() + self.limit;
        let running = self.activity.start(self.peer);
        let permit = tokio::time::timeout_at(deadline, Arc::clone(&self.running).acquire_owned())
            .await
            .map_err(|_| timed_out(self.limit))?
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        let mut state = self.state();
        state.turn = Some(Turn {
            _permit: permit,
            _running: running,
        });
        state.deadline = deadline;
        Ok(())
    }

    /// Gives the turn back: the statement's rows have all been sent, or its portal is
    /// suspended until the client asks for more.
    pub(super) fn release(&self) {
        let turn = self.state().turn.take();
        drop(turn);
    }

    pub(super) fn deadline(&self) -> Instant {
        self.state().deadline
    }

    pub(super) fn limit(&self) -> Duration {
        self.limit
    }
}

pub(super) type RowStream = Pin<Box<dyn Stream<Item = PgWireResult<DataRow>> + Send>>;

/// Ends `rows` with a timeout error once the lease's deadline passes (the deadline moves when
/// a suspended portal is resumed); dropping the inner stream stops DataFusion's execution.
/// The turn is given back with the last row.
pub(super) fn until(rows: RowStream, lease: Arc<Lease>) -> RowStream {
    let armed = lease.deadline();
    let sleep = Box::pin(tokio::time::sleep_until(armed));
    Box::pin(futures::stream::unfold(
        Some((rows, sleep, armed, lease)),
        |state| async move {
            let (mut rows, mut sleep, mut armed, lease) = state?;
            let deadline = lease.deadline();
            if deadline != armed {
                sleep.as_mut().reset(deadline);
                armed = deadline;
            }
            // Checked at every row too: a query whose rows are always ready never lets the
            // timer's branch be polled.
            if Instant::now() >= deadline {
                lease.release();
                return Some((Err(timed_out(lease.limit())), None));
            }
            tokio::select! {
                biased;
                row = rows.next() => match row {
                    Some(row) => Some((row, Some((rows, sleep, armed, lease)))),
                    None => {
                        lease.release();
                        None
                    }
                },
                () = &mut sleep => {
                    lease.release();
                    Some((Err(timed_out(lease.limit())), None))
                }
            }
        },
    ))
}
