//! One listening connection per [`Locks`](crate::Locks), shared by all its waiting calls.
//!
//! A waiting `acquire` subscribes to the notice of its own hand-off ("key" newline "owner"). The
//! first subscriber opens the store's [`Watcher`] and a thread that reads it and passes each
//! notice to the subscribers waiting for it; the thread closes the connection once nobody has
//! been subscribed for [`IDLE`]. If the connection fails, every subscriber hears it (and looks
//! by itself from then on); the next subscriber opens a new one.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::store::{notice, StoreError, Watcher};

/// How long the listening thread keeps its connection with nobody subscribed.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

/// How long the thread waits for a notice before it looks whether anyone is still subscribed.
const TICK: Duration = Duration::from_millis(500);

/// What a subscriber hears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Heard {
    /// Its notice came.
    Notice,
    /// The listening connection failed.
    Failed,
}

/// Where a subscriber hears: a blocking call's channel, or an async task's.
enum Tell {
    Blocking(Sender<Heard>),
    #[cfg(feature = "tokio")]
    Async(tokio::sync::mpsc::UnboundedSender<Heard>),
}

impl Tell {
    fn send(&self, heard: Heard) {
        match self {
            Tell::Blocking(tx) => {
                let _ = tx.send(heard);
            }
            #[cfg(feature = "tokio")]
            Tell::Async(tx) => {
                let _ = tx.send(heard);
            }
        }
    }
}

#[derive(Default)]
struct State {
    /// The subscribers by the payload they wait for.
    waiting: HashMap<String, Vec<(u64, Tell)>>,
    next_id: u64,
    /// Whether a listening thread is running.
    listening: bool,
}

/// The notices of one namespace, shared by the waiting calls of one `Locks`.
pub(crate) struct Hub {
    state: Mutex<State>,
    /// How long the listening thread keeps its connection with nobody subscribed ([`IDLE`]).
    idle: Duration,
}

impl Default for Hub {
    fn default() -> Self {
        Hub::with_idle(IDLE)
    }
}

impl Hub {
    /// A hub whose listening connection closes `idle` after its last subscriber left.
    fn with_idle(idle: Duration) -> Self {
        Hub {
            state: Mutex::default(),
            idle,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // No invariant spans a panic: at worst a subscriber misses a notice and looks by itself.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribes to the notice that `key` was handed to `owner`. If nobody listens yet,
    /// `open` makes the store's watcher (`Ok(None)`: the store cannot notify) and a thread
    /// starts reading it.
    ///
    /// # Errors
    /// `open`'s error, or `Ok(None)` from it: the caller then looks by itself.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        key: &str,
        owner: &str,
        open: impl FnOnce() -> Result<Option<Box<dyn Watcher>>, StoreError>,
    ) -> Result<Option<Subscription>, StoreError> {
        let (tx, heard) = mpsc::channel();
        let ticket = self.enter(key, owner, Tell::Blocking(tx), open)?;
        Ok(ticket.map(|ticket| Subscription { ticket, heard }))
    }

    /// [`subscribe`](Self::subscribe) for an async task (call it where blocking is allowed:
    /// `open` connects).
    ///
    /// # Errors
    /// As [`subscribe`](Self::subscribe).
    #[cfg(feature = "tokio")]
    pub(crate) fn subscribe_async(
        self: &Arc<Self>,
        key: &str,
        owner: &str,
        open: impl FnOnce() -> Result<Option<Box<dyn Watcher>>, StoreError>,
    ) -> Result<Option<AsyncSubscription>, StoreError> {
        let (tx, heard) = tokio::sync::mpsc::unbounded_channel();
        let ticket = self.enter(key, owner, Tell::Async(tx), open)?;
        Ok(ticket.map(|ticket| AsyncSubscription { ticket, heard }))
    }

    fn enter(
        self: &Arc<Self>,
        key: &str,
        owner: &str,
        tell: Tell,
        open: impl FnOnce() -> Result<Option<Box<dyn Watcher>>, StoreError>,
    ) -> Result<Option<Ticket>, StoreError> {
        let payload = notice(key, owner);
        let mut state = self.state();
        if !state.listening {
            // Opened while holding the hub's lock, so that two subscribers never open two.
            let Some(watcher) = open()? else {
                return Ok(None);
            };
            state.listening = true;
            let hub = Arc::clone(self);
            let started = std::thread::Builder::new()
                .name("lock-store-listen".into())
                .spawn(move || hub.listen(watcher));
            if let Err(e) = started {
                state.listening = false;
                return Err(StoreError::Connect {
                    store: String::new(),
                    reason: format!("cannot start the listening thread: {e}"),
                });
            }
        }
        state.next_id += 1;
        let id = state.next_id;
        state
            .waiting
            .entry(payload.clone())
            .or_default()
            .push((id, tell));
        Ok(Some(Ticket {
            hub: Arc::clone(self),
            payload,
            id,
        }))
    }

    /// The listening thread: passes each notice on until the connection fails or nobody has
    /// been subscribed for `idle`.
    fn listen(&self, mut watcher: Box<dyn Watcher>) {
        let mut idle_since: Option<Instant> = None;
        loop {
            let next = watcher.next(TICK);
            let mut state = self.state();
            match next {
                Ok(Some(payload)) => {
                    if let Some(subscribers) = state.waiting.get(&payload) {
                        for (_, tell) in subscribers {
                            tell.send(Heard::Notice);
                        }
                    }
                }
                Ok(None) => {}
                Err(_) => {
                    for (_, subscribers) in state.waiting.drain() {
                        for (_, tell) in subscribers {
                            tell.send(Heard::Failed);
                        }
                    }
                    state.listening = false;
                    return;
                }
            }
            if state.waiting.is_empty() {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= self.idle {
                    state.listening = false;
                    return;
                }
            } else {
                idle_since = None;
            }
        }
    }

    /// How many calls are subscribed (for tests).
    #[cfg(test)]
    fn subscribers(&self) -> usize {
        self.state().waiting.values().map(Vec::len).sum()
    }
}

/// One subscriber's place in the hub; dropping it unsubscribes.
struct Ticket {
    hub: Arc<Hub>,
    payload: String,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.hub.state();
        if let Some(subscribers) = state.waiting.get_mut(&self.payload) {
            subscribers.retain(|(id, _)| *id != self.id);
            if subscribers.is_empty() {
                state.waiting.remove(&self.payload);
            }
        }
    }
}

/// One waiting call's subscription; dropping it unsubscribes.
pub(crate) struct Subscription {
    #[allow(dead_code)] // held for its `Drop`
    ticket: Ticket,
    heard: Receiver<Heard>,
}

impl Subscription {
    /// Waits at most `timeout` for the notice: `Ok(true)` if it came, `Ok(false)` when the time
    /// is up.
    ///
    /// # Errors
    /// `Err(())` if the listening connection failed: the caller looks by itself from then on.
    pub(crate) fn wait(&self, timeout: Duration) -> Result<bool, ()> {
        match self.heard.recv_timeout(timeout) {
            Ok(Heard::Notice) => Ok(true),
            Ok(Heard::Failed) | Err(RecvTimeoutError::Disconnected) => Err(()),
            Err(RecvTimeoutError::Timeout) => Ok(false),
        }
    }
}

/// One waiting task's subscription; dropping it unsubscribes.
#[cfg(feature = "tokio")]
pub(crate) struct AsyncSubscription {
    #[allow(dead_code)] // held for its `Drop`
    ticket: Ticket,
    heard: tokio::sync::mpsc::UnboundedReceiver<Heard>,
}

#[cfg(feature = "tokio")]
impl AsyncSubscription {
    /// Waits at most `timeout` for the notice (see [`Subscription::wait`]).
    ///
    /// # Errors
    /// `Err(())` if the listening connection failed.
    pub(crate) async fn wait(&mut self, timeout: Duration) -> Result<bool, ()> {
        match tokio::time::timeout(timeout, self.heard.recv()).await {
            Ok(Some(Heard::Notice)) => Ok(true),
            Ok(Some(Heard::Failed) | None) => Err(()),
            Err(_) => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A watcher fed by the test: notices from a channel; a `None` item fails it.
    struct Fed(Receiver<Option<String>>, Arc<Mutex<usize>>);

    impl Watcher for Fed {
        fn next(&mut self, timeout: Duration) -> Result<Option<String>, StoreError> {
            match self.0.recv_timeout(timeout) {
                Ok(Some(p)) => Ok(Some(p)),
                Ok(None) | Err(RecvTimeoutError::Disconnected) => Err(StoreError::Lost {
                    store: "fed".into(),
                    reason: "failed".into(),
                }),
                Err(RecvTimeoutError::Timeout) => Ok(None),
            }
        }
    }

    impl Drop for Fed {
        fn drop(&mut self) {
            *self.1.lock().unwrap() -= 1;
        }
    }

    /// Opens fed watchers, counting the live ones; each is fed from the next queued sender.
    struct Opener {
        live: Arc<Mutex<usize>>,
        opened: usize,
        feeds: VecDeque<Receiver<Option<String>>>,
    }

    impl Opener {
        fn open(&mut self) -> Result<Option<Box<dyn Watcher>>, StoreError> {
            self.opened += 1;
            *self.live.lock().unwrap() += 1;
            let feed = self.feeds.pop_front().expect("a feed for each opening");
            Ok(Some(Box::new(Fed(feed, Arc::clone(&self.live)))))
        }
    }

    fn opener(feeds: usize) -> (Opener, Vec<Sender<Option<String>>>) {
        let (txs, rxs): (Vec<_>, VecDeque<_>) = (0..feeds).map(|_| mpsc::channel()).unzip();
        let opener = Opener {
            live: Arc::new(Mutex::new(0)),
            opened: 0,
            feeds: rxs,
        };
        (opener, txs)
    }

    /// Subscribes `owner` to `key`'s notice through `opener` (which must give a watcher).
    fn subscribe(hub: &Arc<Hub>, opener: &mut Opener, key: &str, owner: &str) -> Subscription {
        hub.subscribe(key, owner, || opener.open())
            .unwrap()
            .unwrap()
    }

    /// Waits until `opener`'s live watchers are `n` (at most 5 s).
    fn until_live(opener: &Opener, n: usize) {
        let start = Instant::now();
        while *opener.live.lock().unwrap() != n {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{n} watchers live"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn subscribers_share_one_connection_and_hear_only_their_notice() {
        let hub = Arc::new(Hub::default());
        let (mut opener, feeds) = opener(1);
        let b = subscribe(&hub, &mut opener, "job", "b");
        let c = subscribe(&hub, &mut opener, "job", "c");
        let d = subscribe(&hub, &mut opener, "other", "b");
        assert_eq!(opener.opened, 1);
        assert_eq!(hub.subscribers(), 3);
        feeds[0].send(Some(notice("job", "c"))).unwrap();
        assert_eq!(c.wait(Duration::from_secs(5)), Ok(true));
        assert_eq!(b.wait(Duration::from_millis(50)), Ok(false));
        assert_eq!(d.wait(Duration::ZERO), Ok(false));
        feeds[0].send(Some(notice("job", "b"))).unwrap();
        assert_eq!(b.wait(Duration::from_secs(5)), Ok(true));
        drop((b, c, d));
        assert_eq!(hub.subscribers(), 0);
    }

    #[test]
    fn a_failed_connection_reaches_every_subscriber_and_the_next_one_reopens() {
        let hub = Arc::new(Hub::default());
        let (mut opener, feeds) = opener(2);
        let b = subscribe(&hub, &mut opener, "job", "b");
        let c = subscribe(&hub, &mut opener, "x", "c");
        feeds[0].send(None).unwrap();
        assert_eq!(b.wait(Duration::from_secs(5)), Err(()));
        assert_eq!(c.wait(Duration::from_secs(5)), Err(()));
        // The thread is gone, its watcher dropped: the next subscriber opens a new one.
        until_live(&opener, 0);
        let d = subscribe(&hub, &mut opener, "job", "d");
        assert_eq!(opener.opened, 2);
        feeds[1].send(Some(notice("job", "d"))).unwrap();
        assert_eq!(d.wait(Duration::from_secs(5)), Ok(true));
    }

    /// The connection stays while anyone is subscribed, closes `idle` after the last one left
    /// (here 200 ms instead of [`IDLE`]), and the next subscriber opens a new one.
    #[test]
    fn the_connection_closes_when_idle_and_reopens_for_the_next_subscriber() {
        let hub = Arc::new(Hub::with_idle(Duration::from_millis(200)));
        let (mut opener, feeds) = opener(2);
        let b = subscribe(&hub, &mut opener, "job", "b");
        // Subscribed through several idle periods and ticks: still listening.
        std::thread::sleep(TICK * 3);
        assert_eq!(*opener.live.lock().unwrap(), 1);
        feeds[0].send(Some(notice("job", "b"))).unwrap();
        assert_eq!(b.wait(Duration::from_secs(5)), Ok(true));
        drop(b);
        until_live(&opener, 0);
        let c = subscribe(&hub, &mut opener, "job", "c");
        assert_eq!(opener.opened, 2);
        feeds[1].send(Some(notice("job", "c"))).unwrap();
        assert_eq!(c.wait(Duration::from_secs(5)), Ok(true));
    }

    #[test]
    fn a_store_that_cannot_notify_gives_no_subscription() {
        let hub = Arc::new(Hub::default());
        assert!(hub.subscribe("job", "b", || Ok(None)).unwrap().is_none());
        let failed = hub.subscribe("job", "b", || {
            Err(StoreError::Lost {
                store: "s".into(),
                reason: "r".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(hub.subscribers(), 0);
    }
}
