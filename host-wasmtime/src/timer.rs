//! The host's one timer thread, and what stops it.

use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::inner::Inner;
use crate::lease_shared::run_callbacks;
use lock_core::Instant;

/// Stops the timer thread and saves the table when the last [`LockHost`](crate::LockHost)
/// clone is dropped.
pub(crate) struct Shutdown {
    pub(crate) inner: Arc<Inner>,
    pub(crate) thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Shutdown {
    fn drop(&mut self) {
        if let Err(e) = self.inner.save() {
            self.inner.report(e);
        }
        if let Ok(mut st) = self.inner.state.lock() {
            st.shutdown = true;
        }
        self.inner.timer.notify_all();
        self.inner.granted.notify_all();
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            // Never join oneself: should the last handle ever be dropped on the timer thread
            // (by a callback owning it), that thread exits on its own once it sees `shutdown`.
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

/// Starts the timer thread for `inner`.
pub(crate) fn spawn(inner: &Arc<Inner>) -> std::io::Result<JoinHandle<()>> {
    let weak = Arc::downgrade(inner);
    std::thread::Builder::new()
        .name("lock-timer".into())
        .spawn(move || timer_loop(&weak))
}

/// Sleeps until the next thing due (an expiry or wait deadline, a keep-alive, a save, a
/// reservation renewal), does it, and again, until the host shuts down.
fn timer_loop(weak: &Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let mut callbacks = Vec::new();
        let save_due = match inner.lock() {
            Ok(mut st) if !st.shutdown => inner.run_due(&mut st, &mut callbacks),
            _ => return,
        };
        run_callbacks(callbacks);
        inner.renew_ahead();
        if save_due {
            if let Err(e) = inner.save() {
                inner.report(e);
            }
        }
        let Ok(mut st) = inner.lock() else { return };
        if st.shutdown {
            return;
        }
        if st.renew_wanted {
            continue;
        }
        let now = inner.clock.now();
        let wait_ms = inner
            .next_due(&mut st)
            .map_or(1_000, |t| t.saturating_since(now).0)
            .clamp(1, 1_000);
        st.armed = now.saturating_add(lock_core::Duration(wait_ms));
        if let Ok((mut st, _)) = inner.timer.wait_timeout(st, Duration::from_millis(wait_ms)) {
            st.armed = Instant::ZERO;
        };
    }
}
