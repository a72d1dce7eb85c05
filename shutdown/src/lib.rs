//! `lkplake-shutdown`: how every long-running command stops, one mechanism for all of them (the
//! shape of influxdb3's shutdown crate and mini-redis).
//!
//! A [`Shutdown`] holds a cancellation token and a task tracker. SIGINT or SIGTERM cancels the
//! token ([`Shutdown::on_signals`]); everything that must stop watches it: accept loops stop
//! accepting, producers stop reading input, refresh loops ([`Shutdown::every`]) end. Work in
//! flight runs in tracked tasks, and [`Shutdown::drain`] waits for it up to a deadline, after
//! which the command exits anyway and says what it abandoned. A second signal exits at once.

#![warn(missing_docs)]

use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use tokio_util::sync::CancellationToken as Token;

/// Exit status after a second signal: the shell's 128 + SIGINT.
const FORCED_EXIT: i32 = 130;

/// The token and the tracked tasks of one command.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    tracker: TaskTracker,
}

/// What [`Shutdown::drain`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every tracked task finished.
    Complete,
    /// The deadline passed with this many tasks still running; they are abandoned.
    Abandoned(usize),
}

impl Shutdown {
    /// A shutdown nothing has asked for yet, with no tracked task.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels on the first SIGINT or SIGTERM and exits the process on the second, for a user
    /// who does not want to wait for the drain.
    pub fn on_signals(&self, command: &'static str) {
        let token = self.token.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = signal() => {}
                () = token.cancelled() => return,
            }
            eprintln!("lkplake {command}: stopping (signal again to exit at once)");
            token.cancel();
            signal().await;
            eprintln!("lkplake {command}: second signal, exiting without finishing");
            std::process::exit(FORCED_EXIT);
        });
    }

    /// The token to hand to code that must watch for the stop.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Resolves once the stop was asked for.
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }

    /// Runs `task` as tracked work: [`Shutdown::drain`] waits for it.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// Runs `tick` every `period` until the stop, the one refresh loop of every command that
    /// follows something (the lake's commits, the exporter's series, the pipeline's health).
    /// A tick that is late because the previous one ran long is not made up for.
    pub fn every<F, Fut>(&self, period: Duration, mut tick: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let token = self.token.clone();
        self.tracker.spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    _ = interval.tick() => {}
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tick() => {}
                }
            }
        });
    }

    /// Cancels, then waits for the tracked tasks to finish, at most `deadline`.
    pub async fn drain(&self, deadline: Duration) -> Drained {
        self.token.cancel();
        self.tracker.close();
        match tokio::time::timeout(deadline, self.tracker.wait()).await {
            Ok(()) => Drained::Complete,
            Err(_) => {
                let left = self.tracker.len();
                tracing::warn!(
                    left,
                    ?deadline,
                    "tasks still running at the shutdown deadline: abandoned"
                );
                Drained::Abandoned(left)
            }
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn signal() {
    let interrupt = tokio::signal::ctrl_c();
    let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        let _ = interrupt.await;
        return;
    };
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn drain_waits_for_tracked_work_that_ends_within_the_deadline() {
        let shutdown = Shutdown::new();
        let token = shutdown.token();
        let finished = Arc::new(AtomicUsize::new(0));
        let done = Arc::clone(&finished);
        shutdown.spawn(async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_secs(2)).await;
            done.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(
            shutdown.drain(Duration::from_secs(5)).await,
            Drained::Complete
        );
        assert_eq!(finished.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn drain_gives_up_at_the_deadline_and_counts_what_it_abandoned() {
        let shutdown = Shutdown::new();
        shutdown.spawn(std::future::pending::<()>());
        shutdown.spawn(std::future::pending::<()>());
        assert_eq!(
            shutdown.drain(Duration::from_secs(1)).await,
            Drained::Abandoned(2)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_ticks_until_the_stop_and_not_after() {
        let shutdown = Shutdown::new();
        let ticks = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&ticks);
        shutdown.every(Duration::from_secs(1), move || {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        // The first tick is immediate, then one per second: 0 s, 1 s, 2 s.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(
            shutdown.drain(Duration::from_secs(1)).await,
            Drained::Complete
        );
        let at_stop = ticks.load(Ordering::SeqCst);
        assert_eq!(at_stop, 3);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(ticks.load(Ordering::SeqCst), at_stop);
    }
}
