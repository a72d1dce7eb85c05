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
use tokio_util::task::AbortOnDropHandle;

/// What a statement holds while it runs: a running slot (none for a statement that reads no
/// lake table, or once its execution ended ahead of a slow client) and its place in the
/// connection's activity (so a stopping server knows the connection is busy).
struct Turn {
    permit: Option<OwnedSemaphorePermit>,
    _running: Arc<Running>,
}

/// A statement's right to execute, given back between the fetches of a suspended portal.
pub(super) struct Lease {
    /// The turns to wait for; `None` for a statement that takes none (`admission`).
    running: Option<Arc<Semaphore>>,
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
    /// Waits for a turn of `running` (if any) within `limit`, which is also the deadline of
    /// the statement's work from now on.
    pub(super) async fn take(
        running: Option<&Arc<Semaphore>>,
        activity: &Arc<Activity>,
        peer: SocketAddr,
        limit: Duration,
    ) -> PgWireResult<Arc<Self>> {
        let lease = Arc::new(Self {
            running: running.cloned(),
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
        let permit = match &self.running {
            Some(turns) => Some(
                tokio::time::timeout_at(deadline, Arc::clone(turns).acquire_owned())
                    .await
                    .map_err(|_| timed_out(self.limit))?
                    .map_err(|e| PgWireError::ApiError(Box::new(e)))?,
            ),
            None => None,
        };
        let mut state = self.state();
        state.turn = Some(Turn {
            permit,
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

    /// Whether the statement holds a running slot now.
    fn holds_slot(&self) -> bool {
        self.state()
            .turn
            .as_ref()
            .is_some_and(|turn| turn.permit.is_some())
    }

    /// Gives back the running slot alone: the statement's execution is over, and only its
    /// rows are still on their way to the client.
    fn release_slot(&self) {
        let permit = self
            .state()
            .turn
            .as_mut()
            .and_then(|turn| turn.permit.take());
        drop(permit);
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

/// Bytes of encoded rows read ahead of a slow client. A dashboard's answer fits, so its
/// statement's turn ends with its execution rather than when the client has read the last
/// row; a larger answer waits for the client as before, holding its turn.
const READ_AHEAD_BYTES: u32 = 8 << 20;

/// What a row read ahead costs besides its encoded bytes (its place in the channel, the
/// message around it): a narrow row costs far more than its few bytes.
const ROW_OVERHEAD: usize = 128;

/// A row read ahead with the budget it holds, or the end of the rows.
enum Ahead {
    Row(PgWireResult<DataRow>, Option<OwnedSemaphorePermit>),
    End,
}

/// Pulls `rows` ahead of the client, up to [`READ_AHEAD_BYTES`], and gives the lease's running
/// slot back as soon as the last row is produced (or the first error, or the deadline). The
/// statement's deadline and its place in the connection's activity stay with the stream
/// [`until`] makes of the result. A statement that holds no slot is returned as it is.
pub(super) fn read_ahead(rows: RowStream, lease: Arc<Lease>) -> RowStream {
    if !lease.holds_slot() {
        return rows;
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let producer = tokio::spawn(produce(rows, Arc::clone(&lease), tx));
    let guard = AbortOnDropHandle::new(producer);
    Box::pin(futures::stream::unfold(
        Some((rx, guard)),
        |state| async move {
            let (mut rx, guard) = state?;
            match rx.recv().await {
                Some(Ahead::Row(row, _budget)) => Some((row, Some((rx, guard)))),
                Some(Ahead::End) => None,
                // The reading task ended without saying so: it failed, and the answer is cut.
                None => Some((
                    Err(PgWireError::ApiError(
                        "the statement's rows stopped before their end".into(),
                    )),
                    None,
                )),
            }
        },
    ))
}

/// The task of [`read_ahead`]: each row waits for its share of the budget, all of it within
/// the statement's deadline (a client that stops reading must not keep the slot past it).
async fn produce(
    mut rows: RowStream,
    lease: Arc<Lease>,
    tx: tokio::sync::mpsc::UnboundedSender<Ahead>,
) {
    let budget = Arc::new(Semaphore::new(READ_AHEAD_BYTES as usize));
    let deadline = tokio::time::sleep_until(lease.deadline());
    tokio::pin!(deadline);
    let time_out = |tx: &tokio::sync::mpsc::UnboundedSender<Ahead>| {
        let _ = tx.send(Ahead::Row(Err(timed_out(lease.limit())), None));
        let _ = tx.send(Ahead::End);
    };
    loop {
        let next = tokio::select! {
            row = rows.next() => row,
            () = &mut deadline => {
                time_out(&tx);
                break;
            }
        };
        let Some(row) = next else {
            let _ = tx.send(Ahead::End);
            break;
        };
        let failed = row.is_err();
        let cost = row.as_ref().map_or(0, |r| r.data.capacity()) + ROW_OVERHEAD;
        let cost = u32::try_from(cost)
            .unwrap_or(u32::MAX)
            .min(READ_AHEAD_BYTES);
        let bytes = tokio::select! {
            bytes = Arc::clone(&budget).acquire_many_owned(cost) => bytes,
            () = &mut deadline => {
                time_out(&tx);
                break;
            }
        };
        let Ok(bytes) = bytes else { break };
        if tx.send(Ahead::Row(row, Some(bytes))).is_err() {
            break;
        }
        if failed {
            let _ = tx.send(Ahead::End);
            break;
        }
    }
    lease.release_slot();
}
