//! What a run did: the seeded random source, the shared timeline, and the events the checkers
//! read (each grant a client was handed, each fault the nemesis made).

use std::sync::Mutex;

/// A seeded generator (SplitMix64): the same seed plans the same operations and faults.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The generator of one actor of the run (a client, the nemesis), from the run's seed.
    pub fn stream(seed: u64, actor: u64) -> Self {
        let mut root = Rng(seed ^ actor.wrapping_mul(0xa076_1d64_78bd_642f));
        Rng(root.next())
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }

    /// True with probability `percent` %.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Microseconds since the Unix epoch on this machine's clock: the clients', the register's and
/// (on this one machine, without a clock offset) the servers' timeline.
pub fn now_us() -> u64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::try_from(d.as_micros()).unwrap()
}

/// Which promise a hold's key tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// An exclusive lock around a read-modify-write of the shared set in the register.
    LockSet,
    /// A semaphore of [`PLACES`] permits taken by shared (one) and exclusive (all) leases.
    Places,
    /// Candidates of one election; each leader writes to its own register with its term's
    /// fence while it leads.
    Election,
}

/// The permits of the [`Workload::Places`] key.
pub const PLACES: u32 = 3;

/// One lease a client was handed, and how long it may believe it held it.
#[derive(Clone, Debug)]
pub struct Hold {
    pub client: usize,
    pub workload: Workload,
    pub key: String,
    pub owner: String,
    /// Exclusive (takes every place) or shared (one).
    pub exclusive: bool,
    pub fence: u64,
    /// When the acquire was called (0: unknown, a term handed over in line) and when it
    /// answered (a term: when its body started).
    pub invoked_us: u64,
    pub granted_us: u64,
    /// The lease's deadline on this machine's clock, as its holder saw it when it was granted
    /// (the time it had left); for a leader, when its stop signal was due as of its last look
    /// (the lease's end on its clock less the margin).
    pub deadline_us: u64,
    /// When its holder called release (`None`: it never did: it crashed, or the run ended).
    pub released_us: Option<u64>,
}

impl Hold {
    /// Until when its holder may believe it holds the lease: until it called release, or
    /// until its deadline, whichever is first.
    pub fn believed_until(&self) -> u64 {
        self.released_us
            .map_or(self.deadline_us, |r| r.min(self.deadline_us))
    }
}

/// A fault the nemesis made, and when.
#[derive(Clone, Debug)]
pub struct Fault {
    pub what: String,
    pub from_us: u64,
    pub to_us: u64,
}

/// Everything the actors of a run recorded.
#[derive(Default)]
pub struct History {
    pub holds: Mutex<Vec<Hold>>,
    pub faults: Mutex<Vec<Fault>>,
    /// Operations tried, and those that failed with a store error (the lock's refusals apart).
    pub tried: std::sync::atomic::AtomicUsize,
    pub failed: std::sync::atomic::AtomicUsize,
    pub stalls: std::sync::atomic::AtomicUsize,
    pub crashes: std::sync::atomic::AtomicUsize,
}
