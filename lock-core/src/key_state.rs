//! The per-key state machine: one key's lease and its FIFO wait queue.
//!
//! [`KeyState`] knows nothing of tables, hashing, timers or other keys. Every transition takes the
//! caller's `now` and a [`FenceSource`], first applies every time-driven change up to `now` (expiry,
//! hand-off, wait timeout), then the request, and returns a [`Transition`]: the outcome and the
//! events it produced, each with its true instant. A host that keeps per-key records elsewhere
//! (a database row, a Redis hash) can load a record, apply a transition and store it back with
//! compare-and-set; [`LockTable`](crate::LockTable) does exactly this over an in-memory index.
//!
//! The caller must pass a `now` that never goes backwards for this key (the table guarantees it by
//! clamping to its clock) and inputs checked with [`Limits`](crate::Limits). Nothing here panics on
//! any input.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use foldhash::fast::FixedState;
use hashbrown::HashTable;

use crate::stored_name::{hash_name, same, Name};
use crate::{
    AcquireOptions, AcquireOutcome, Corruption, Duration, EventKind, Fence, Grant, HolderInfo,
    Instant, KeyEvent, KeyInfo, LeaseEnd, Limits, LockError, Mode, ReleaseOutcome, WaiterInfo,
};

/// Where fresh fencing tokens come from. Each call must return a token strictly greater than every
/// token returned before, by this source and by any other source sharing the same resource.
pub trait FenceSource {
    /// A fresh fencing token.
    fn next_fence(&mut self) -> Fence;
}

/// The table's fencing-token counter: 1, 2, 3, ...
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FenceCounter {
    last: Fence,
}

impl FenceCounter {
    /// Highest last token a counter accepts (2^63): leaves more tokens than any table can use.
    pub const MAX_LAST: Fence = Fence::new(1 << 63);

    /// A counter whose next token is `last + 1`. `None` if `last` exceeds [`FenceCounter::MAX_LAST`].
    #[must_use]
    pub fn starting_after(last: Fence) -> Option<Self> {
        (last <= Self::MAX_LAST).then_some(FenceCounter { last })
    }

    /// The last token issued, 0 if none.
    #[must_use]
    pub fn last(&self) -> Fence {
        self.last
    }
}

impl FenceSource for FenceCounter {
    fn next_fence(&mut self) -> Fence {
        self.last = self.last.saturating_next();
        self.last
    }
}

/// Memory of leases that were lost (expired or stolen), so that a late `release`/`extend` by
/// their holder answers [`LockError::Expired`] or [`LockError::Stolen`] instead of
/// [`LockError::NotHeld`].
pub trait ExpiredLeases {
    /// If `owner`'s lease with this `fence` (on the key being asked about) was lost and is still
    /// remembered: how ([`LockError::Expired`] with its deadline, or [`LockError::Stolen`] with
    /// the steal's instant).
    fn lost(&self, owner: &str, fence: Fence) -> Option<LockError>;
}

/// Remembers nothing: every forgotten lease is simply "not held".
impl ExpiredLeases for () {
    fn lost(&self, _owner: &str, _fence: Fence) -> Option<LockError> {
        None
    }
}

/// What the table allows one key, passed to every [`KeyState`] transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Room {
    /// Longest queue of this key.
    pub max_waiters_per_key: usize,
    /// Most waiters in the whole table.
    pub max_waiters: usize,
    /// Waiters already queued in the whole table.
    pub waiters_in_table: usize,
    /// Most leases of one key (the shared leases of a key without permits).
    pub max_holders_per_key: usize,
    /// The table's lock-delay: a lease keeps at least this one.
    pub lock_delay: Duration,
}

impl Room {
    /// The room `limits` allow, with `waiters_in_table` already queued.
    #[must_use]
    pub fn of(limits: &Limits, waiters_in_table: usize) -> Self {
        Room {
            max_waiters_per_key: limits.max_waiters_per_key,
            max_waiters: limits.max_waiters,
            waiters_in_table,
            max_holders_per_key: limits.max_holders_per_key,
            lock_delay: limits.lock_delay,
        }
    }
}

/// What a lease carries beyond its owner, fence and deadline; boxed, since plain leases (live,
/// exclusive, without options) carry none of it, and a plain lease stays small.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct LeaseTerms {
    mode: Mode,
    ended: Option<LeaseEnd>,
    metadata: Name,
    min_until: Option<Instant>,
    lock_delay: Duration,
    /// Its grant instant is not known: it was read from a record or snapshot written before
    /// grant instants were kept (format versions 1 and 2).
    grant_unknown: bool,
}

impl Default for LeaseTerms {
    fn default() -> Self {
        LeaseTerms {
            mode: Mode::Exclusive,
            ended: None,
            metadata: Name::new(""),
            min_until: None,
            lock_delay: Duration::ZERO,
            grant_unknown: false,
        }
    }
}

impl LeaseTerms {
    fn is_default(&self) -> bool {
        self.mode == Mode::Exclusive
            && self.ended.is_none()
            && self.metadata.as_bytes().is_empty()
            && self.min_until.is_none()
            && self.lock_delay.is_zero()
            && !self.grant_unknown
    }
}

/// A lease of one key: live, or ended for its holder but still taking its place (see
/// [`Lease::ended`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    owner: Name,
    fence: Fence,
    deadline: Instant,
    /// When it was granted; `Instant::ZERO` when its terms say it is not known.
    granted_at: Instant,
    terms: Option<Box<LeaseTerms>>,
}

impl Lease {
    /// A live exclusive lease without terms whose grant instant is not known, e.g. read from a
    /// record written before grant instants were kept; see
    /// [`with_granted_at`](Self::with_granted_at).
    #[must_use]
    pub fn new(owner: &str, fence: Fence, deadline: Instant) -> Self {
        Lease {
            owner: Name::new(owner),
            fence,
            deadline,
            granted_at: Instant::ZERO,
            terms: None,
        }
        .with_granted_at(None)
    }
    /// The same lease, granted at `at` (`None`: not known).
    #[must_use]
    pub fn with_granted_at(mut self, at: Option<Instant>) -> Self {
        let mut terms = self.terms.take().map(|t| *t).unwrap_or_default();
        terms.grant_unknown = at.is_none();
        self.granted_at = at.unwrap_or(Instant::ZERO);
        self.set_terms(terms);
        self
    }
    /// The same lease with these terms (exclusive, empty metadata, no minimum hold and no
    /// lock-delay keep it plain).
    #[must_use]
    pub fn with_terms(
        mut self,
        mode: Mode,
        metadata: &str,
        min_until: Option<Instant>,
        lock_delay: Duration,
    ) -> Self {
        let ended = self.ended();
        let grant_unknown = self.granted_at().is_none();
        self.set_terms(LeaseTerms {
            mode,
            ended,
            metadata: Name::new(metadata),
            min_until,
            lock_delay,
            grant_unknown,
        });
        self
    }
    /// The same lease, ended for its holder (`Some`) but still taking its place until its
    /// deadline.
    #[must_use]
    pub fn with_end(mut self, ended: Option<LeaseEnd>) -> Self {
        let mut terms = self.terms.take().map(|t| *t).unwrap_or_default();
        terms.ended = ended;
        self.set_terms(terms);
        self
    }
    fn set_terms(&mut self, terms: LeaseTerms) {
        self.terms = (!terms.is_default()).then(|| Box::new(terms));
    }
    /// Its owner.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.owner.as_str()
    }
    /// Its fencing token.
    #[must_use]
    pub fn fence(&self) -> Fence {
        self.fence
    }
    /// Its deadline: live while `now < deadline`. For a lease that has [`ended`](Self::ended),
    /// the instant its place is freed.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
    /// Exclusive or shared.
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.terms.as_ref().map_or(Mode::Exclusive, |t| t.mode)
    }
    /// Its metadata ("" if none).
    #[must_use]
    pub fn metadata(&self) -> &str {
        self.terms.as_ref().map_or("", |t| t.metadata.as_str())
    }
    /// Until when an early release keeps it (its minimum hold), if it has one.
    #[must_use]
    pub fn min_until(&self) -> Option<Instant> {
        self.terms.as_ref().and_then(|t| t.min_until)
    }
    /// When it was granted (its acquire, the hand-off that promoted its waiter, or its steal):
    /// extensions keep it. `None` for a lease read from a record or snapshot written before
    /// grant instants were kept (format versions 1 and 2).
    #[must_use]
    pub fn granted_at(&self) -> Option<Instant> {
        match self.terms.as_ref().is_some_and(|t| t.grant_unknown) {
            true => None,
            false => Some(self.granted_at),
        }
    }
    /// How long its place stays taken after it expires or is stolen.
    #[must_use]
    pub fn lock_delay(&self) -> Duration {
        self.terms.as_ref().map_or(Duration::ZERO, |t| t.lock_delay)
    }
    /// `None` while its holder holds it; else why it ended (its place is still taken until its
    /// deadline).
    #[must_use]
    pub fn ended(&self) -> Option<LeaseEnd> {
        self.terms.as_ref().and_then(|t| t.ended)
    }
    #[inline]
    fn is_live(&self) -> bool {
        self.terms.as_ref().is_none_or(|t| t.ended.is_none())
    }
    fn is_plain(&self) -> bool {
        self.terms.is_none()
    }
    fn grant(&self) -> Grant {
        Grant {
            fence: self.fence,
            deadline: self.deadline,
        }
    }
    fn info(&self) -> HolderInfo {
        HolderInfo {
            owner: self.owner.as_str().into(),
            fence: self.fence,
            deadline: self.deadline,
            mode: self.mode(),
            metadata: self.metadata().into(),
            min_until: self.min_until(),
            ended: self.ended(),
            granted_at: self.granted_at(),
        }
    }
    /// Ends it for its holder: it takes its place until `until`, or leaves now (`None`) if
    /// `until` is not after `at`. Returns whether it stays.
    fn end(&mut self, why: LeaseEnd, at: Instant, until: Instant) -> bool {
        self.terms.get_or_insert_with(Box::default).ended = Some(why);
        self.deadline = until;
        until > at
    }
}

// A plain lease: its owner inline (24 bytes on 64-bit), fence, deadline, grant instant and one
// pointer.
const _: () = assert!(core::mem::size_of::<Lease>() <= 56);

/// What a waiter asked for beyond its TTL; boxed, since plain waiters ask for none of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct WaiterTerms {
    metadata: Name,
    min_hold: Duration,
    lock_delay: Duration,
    /// Its place is kept only while it renews it within this long (0: for the whole wait).
    wait_alive: Duration,
    /// The end of the wait it asked for; its `wait_deadline` is earlier while it keeps its
    /// place by renewals, never later.
    wait_end: Instant,
}

/// A caller waiting for a key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    owner: Name,
    ttl: Duration,
    wait_deadline: Instant,
    mode: Mode,
    terms: Option<Box<WaiterTerms>>,
}

impl Waiter {
    /// A plain exclusive waiter, e.g. loaded from an external store.
    #[must_use]
    pub fn new(owner: &str, ttl: Duration, wait_deadline: Instant) -> Self {
        Waiter {
            owner: Name::new(owner),
            ttl,
            wait_deadline,
            mode: Mode::Exclusive,
            terms: None,
        }
    }
    /// The same waiter, asking for these options (its permits are the key's). With a
    /// [`wait_alive`](AcquireOptions::wait_alive), its wait still ends at the wait deadline it
    /// was made with, but its place is kept only to [`kept_alive`](Self::kept_alive).
    #[must_use]
    pub fn with_options(mut self, options: &AcquireOptions<'_>) -> Self {
        self.mode = options.mode;
        self.terms = (!options.metadata.is_empty()
            || !options.min_hold.is_zero()
            || !options.lock_delay.is_zero()
            || !options.wait_alive.is_zero())
        .then(|| {
            Box::new(WaiterTerms {
                metadata: Name::new(options.metadata),
                min_hold: options.min_hold,
                lock_delay: options.lock_delay,
                wait_alive: options.wait_alive,
                wait_end: self.wait_deadline,
            })
        });
        self
    }
    /// The same waiter with its place kept only to `alive` (never past the end of its wait), as
    /// a queued or renewed waiter with a [`wait_alive`](AcquireOptions::wait_alive) is, or as it
    /// was stored.
    #[must_use]
    pub fn kept_alive(mut self, alive: Instant) -> Self {
        self.wait_deadline = self.wait_deadline.min(alive);
        self
    }
    /// Who waits.
    #[must_use]
    pub fn owner(&self) -> &str {
        self.owner.as_str()
    }
    /// The TTL its lease gets on hand-off.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
    /// It keeps its place while `now < wait_deadline` (see [`wait_end`](Self::wait_end)).
    #[must_use]
    pub fn wait_deadline(&self) -> Instant {
        self.wait_deadline
    }
    /// The end of the wait it asked for: its [`wait_deadline`](Self::wait_deadline), or later
    /// for a waiter that keeps its place by renewals.
    #[must_use]
    pub fn wait_end(&self) -> Instant {
        self.terms
            .as_ref()
            .filter(|t| !t.wait_alive.is_zero())
            .map_or(self.wait_deadline, |t| t.wait_end)
    }
    /// The options it asked for (permits 0: a waiter takes the key's).
    #[must_use]
    pub fn options(&self) -> AcquireOptions<'_> {
        let terms = self.terms.as_deref();
        AcquireOptions {
            mode: self.mode,
            permits: 0,
            min_hold: terms.map_or(Duration::ZERO, |t| t.min_hold),
            lock_delay: terms.map_or(Duration::ZERO, |t| t.lock_delay),
            metadata: terms.map_or("", |t| t.metadata.as_str()),
            wait_alive: terms.map_or(Duration::ZERO, |t| t.wait_alive),
        }
    }
    /// A renewal at `now` that asks to wait until `wait_end`: the end of the wait moves there
    /// if that is later, and the place is kept to that end, or for `wait_alive` from `now` if
    /// the waiter has one (never earlier than it was).
    fn renew(&mut self, wait_end: Instant, now: Instant) {
        let kept = match self.terms.as_deref_mut() {
            Some(t) if !t.wait_alive.is_zero() => {
                t.wait_end = t.wait_end.max(wait_end);
                t.wait_end.min(now.saturating_add(t.wait_alive))
            }
            _ => wait_end,
        };
        self.wait_deadline = self.wait_deadline.max(kept);
    }
    fn info(&self) -> WaiterInfo {
        WaiterInfo {
            owner: self.owner.as_str().into(),
            ttl: self.ttl,
            wait_deadline: self.wait_deadline,
            wait_end: self.wait_end(),
            mode: self.mode,
            metadata: self.options().metadata.into(),
        }
    }
}

/// The result of one transition: the outcome of the request and the events it produced, in the
/// order they happened.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition<T> {
    /// The answer to the request.
    pub outcome: Result<T, LockError>,
    /// Time-driven events (and hand-offs) that happened during the call, oldest first.
    pub events: Vec<KeyEvent>,
}

/// `now + ttl`, refused if it does not fit: a direct grant or an extension always yields a
/// lease that is live at `now`. (A hand-off at `t` saturates instead: the waiter's wait deadline
/// is after `t`, so `t < u64::MAX` and the lease is still live at `t`.)
fn deadline_after(now: Instant, ttl: Duration) -> Result<Instant, LockError> {
    now.checked_add(ttl)
        .ok_or(LockError::DeadlineOverflow { now, ttl })
}

/// The rare parts of a key: its leases after the first, and its permits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct More {
    /// Leases after the first, in grant order.
    leases: Vec<Lease>,
    /// The key's permits (0: a plain lock), fixed at its first grant until it is free.
    permits: u32,
}

/// One key: its leases (live, or ended but still taking their place) and a FIFO queue of
/// waiters (never waiters without a lease).
///
/// A plain key, one exclusive lease and maybe waiters, keeps everything inline; shared leases,
/// permits and the rest live in a box it only allocates when used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyState {
    /// The first lease in grant order.
    lease: Option<Lease>,
    /// Boxed on purpose: most keys have no waiters, and a boxed queue costs 8 bytes per key
    /// instead of 32.
    #[allow(clippy::box_collection)]
    queue: Option<Box<VecDeque<Waiter>>>,
    more: Option<Box<More>>,
}

// A plain key: its first lease and two pointers (the queue, the rare parts).
const _: () = assert!(core::mem::size_of::<KeyState>() <= 72);

impl KeyState {
    /// A free key.
    #[must_use]
    pub fn new() -> Self {
        KeyState::default()
    }

    /// Rebuilds a key from stored parts (leases in grant order), checking its invariants against
    /// `room`: fences in increasing order; at most one live lease per owner; a live exclusive
    /// lease alone among the live ones; no more live leases than the key's permits; a minimum
    /// hold within its lease; waiters only behind a lease, the first of them not grantable, no
    /// owner twice, no live holder among them; nothing that ended at or before `now`.
    ///
    /// # Errors
    /// The first broken invariant.
    pub fn from_parts(
        leases: Vec<Lease>,
        waiters: Vec<Waiter>,
        permits: u32,
        now: Instant,
        room: &Room,
    ) -> Result<Self, Corruption> {
        if leases.is_empty() && !waiters.is_empty() {
            return Err(Corruption::WaitersWithoutLease);
        }
        // Owners are checked for repeats by hash: compared pairwise, a thousand waiters cost
        // half a million comparisons on every read of their key.
        let mut live_owners = NameSet::with_capacity(leases.len());
        for (i, l) in leases.iter().enumerate() {
            if l.deadline <= now {
                return Err(Corruption::LeaseAlreadyExpired);
            }
            if l.is_live() && l.min_until().is_some_and(|m| m > l.deadline) {
                return Err(Corruption::MinHoldPastDeadline);
            }
            let earlier = &leases[..i];
            let twice = l.is_live() && !live_owners.insert(l.owner.as_bytes());
            if earlier.last().is_some_and(|p| p.fence >= l.fence) || twice {
                return Err(Corruption::HoldersConflict);
            }
        }
        let live: Vec<&Lease> = leases.iter().filter(|l| l.is_live()).collect();
        let cap = if permits == 0 {
            room.max_holders_per_key
        } else {
            permits as usize
        };
        let exclusive_with_others =
            live.len() > 1 && live.iter().any(|l| l.mode() == Mode::Exclusive);
        if exclusive_with_others || live.len() > cap || leases.len() > cap + 1 {
            return Err(Corruption::HoldersConflict);
        }
        let mut waiting = NameSet::with_capacity(waiters.len());
        for w in &waiters {
            if w.wait_deadline <= now {
                return Err(Corruption::WaitAlreadyTimedOut);
            }
            if w.ttl.is_zero() {
                return Err(Corruption::WaiterZeroTtl);
            }
            if live_owners.contains(w.owner.as_bytes()) {
                return Err(Corruption::HolderAlsoWaiting);
            }
            if !waiting.insert(w.owner.as_bytes()) {
                return Err(Corruption::OwnerWaitingTwice);
            }
        }
        drop((live_owners, waiting)); // they borrow the names that move into the state
        let mut state = KeyState::new();
        state.set_leases(leases);
        if permits != 0 {
            state.more.get_or_insert_with(Box::default).permits = permits;
        }
        if let Some(head) = waiters.first() {
            if state.grantable(head.mode, room) {
                return Err(Corruption::GrantableWaiter);
            }
        }
        state.queue = (!waiters.is_empty()).then(|| Box::new(VecDeque::from(waiters)));
        Ok(state)
    }

    /// Rewrites every lease's fence (a store record settles its provisional fences this way).
    pub(crate) fn map_fence(&mut self, f: impl Fn(Fence) -> Fence) {
        if let Some(lease) = self.lease.as_mut() {
            lease.fence = f(lease.fence);
        }
        if let Some(more) = self.more.as_mut() {
            for lease in &mut more.leases {
                lease.fence = f(lease.fence);
            }
        }
    }

    /// The first lease in grant order, if any (as of the last transition): the only one of a
    /// key held exclusively.
    #[must_use]
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// Every lease in grant order: the live ones and those that ended but still take their
    /// place.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        let rest = self.more.iter().flat_map(|m| m.leases.iter());
        self.lease.iter().chain(rest)
    }

    /// Number of leases (see [`leases`](Self::leases)).
    #[must_use]
    pub fn lease_count(&self) -> usize {
        usize::from(self.lease.is_some()) + self.more.as_ref().map_or(0, |m| m.leases.len())
    }

    /// The key's permits (0: a plain lock).
    #[must_use]
    pub fn permits(&self) -> u32 {
        self.more.as_ref().map_or(0, |m| m.permits)
    }

    /// The waiters, first in line first.
    pub fn waiters(&self) -> impl Iterator<Item = &Waiter> {
        self.queue.iter().flat_map(|q| q.iter())
    }

    /// Number of waiters.
    #[must_use]
    pub fn waiter_count(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.len())
    }

    /// True when no lease is held or kept (and therefore nobody waits): the record can be
    /// dropped.
    #[must_use]
    pub fn is_free(&self) -> bool {
        self.lease.is_none()
    }

    /// The earliest instant at which this key changes by time alone (a lease deadline or a wait
    /// deadline), or `None` if it is free.
    #[must_use]
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        let first = self.lease.as_ref()?.deadline;
        let waits = self
            .waiters()
            .map(|w| w.wait_deadline)
            .fold(first, Instant::min);
        let Some(more) = &self.more else {
            return Some(waits);
        };
        Some(
            more.leases
                .iter()
                .map(|l| l.deadline)
                .fold(waits, Instant::min),
        )
    }

    /// The latest instant at which a lease of this key still holds or keeps its place by time
    /// alone: a live lease's deadline plus its lock-delay, a kept place's end; `None` if the
    /// key is free. A store that may have lost this key's record waits this long (measured from
    /// the transition's instant) before it grants the key again (`lock-store`'s recovery delay).
    #[must_use]
    pub fn holds_until(&self) -> Option<Instant> {
        self.leases()
            .map(|l| match l.is_live() {
                true => l.deadline.saturating_add(l.lock_delay()),
                false => l.deadline,
            })
            .max()
    }

    /// Whether every lease is plain and alone (the usual key: one exclusive lease without
    /// options), so that the fast paths need not look further.
    #[inline]
    fn one_plain_lease(&self) -> bool {
        self.more.is_none() && self.lease.as_ref().is_some_and(Lease::is_plain)
    }

    /// Inspection: the leases, the queue and the permits, or `None` if the key is free.
    #[must_use]
    pub fn info(&self) -> Option<KeyInfo> {
        self.lease.as_ref()?;
        Some(KeyInfo {
            holders: self.leases().map(Lease::info).collect(),
            waiters: self.waiters().map(Waiter::info).collect(),
            permits: self.permits(),
        })
    }

    // ----- the lease list -------------------------------------------------------------------

    /// Replaces every lease by `leases` (in grant order); keeps the permits.
    fn set_leases(&mut self, leases: Vec<Lease>) {
        let mut leases = leases.into_iter();
        self.lease = leases.next();
        let rest: Vec<Lease> = leases.collect();
        match (self.more.as_mut(), rest.is_empty()) {
            (Some(more), _) => more.leases = rest,
            (None, true) => {}
            (None, false) => {
                self.more = Some(Box::new(More {
                    leases: rest,
                    permits: 0,
                }));
            }
        }
    }

    /// Takes every lease out, in grant order.
    fn take_leases(&mut self) -> Vec<Lease> {
        let rest = self.more.as_mut().map(|m| core::mem::take(&mut m.leases));
        let mut all = Vec::with_capacity(1 + rest.as_ref().map_or(0, Vec::len));
        all.extend(self.lease.take());
        all.extend(rest.into_iter().flatten());
        all
    }

    /// Appends a lease (the newest in grant order).
    fn push_lease(&mut self, lease: Lease) {
        if self.lease.is_none() {
            self.lease = Some(lease);
        } else {
            self.more
                .get_or_insert_with(Box::default)
                .leases
                .push(lease);
        }
    }

    /// Drops what a key no longer needs: an empty queue, and the rare parts of a free key.
    #[inline]
    fn tidy(&mut self) {
        if self.more.is_none() && self.queue.is_none() {
            return;
        }
        if self.queue.as_ref().is_some_and(|q| q.is_empty()) {
            self.queue = None;
        }
        let free = self.lease.is_none() && self.queue.is_none();
        let unused = (self.more.as_ref()).is_some_and(|m| m.leases.is_empty() && m.permits == 0);
        if free || unused {
            self.more = None;
        }
    }

    #[inline]
    fn live_lease_of(&self, owner: &str) -> Option<&Lease> {
        if self.one_plain_lease() {
            return self.lease.as_ref().filter(|l| l.owner.is(owner));
        }
        self.leases().find(|l| l.is_live() && l.owner.is(owner))
    }

    /// Whether a request in `mode` could be granted now, queue aside: an exclusive one when the
    /// key has no lease at all, a shared one while every lease is shared and a place is free.
    fn grantable(&self, mode: Mode, room: &Room) -> bool {
        match mode {
            Mode::Exclusive => self.lease.is_none(),
            Mode::Shared => {
                let cap = match self.permits() {
                    0 => room.max_holders_per_key,
                    n => n as usize,
                };
                self.leases().all(|l| l.mode() == Mode::Shared) && self.lease_count() < cap
            }
        }
    }

    /// When the key next changes, as a retry-after hint: the earliest end of a lease.
    fn earliest_end(&self) -> Instant {
        if let (Some(lease), None) = (&self.lease, &self.more) {
            return lease.deadline;
        }
        self.leases()
            .map(|l| l.deadline)
            .min()
            .unwrap_or(Instant::ZERO)
    }

    // ----- time ------------------------------------------------------------------------------

    /// Applies every time-driven change with an instant `<= now`, in order of their instants:
    /// waiters whose wait deadline passed leave (before a lease ending at the same instant is
    /// handed off: intervals are half-open), leases that ran out end (or keep their place for
    /// their lock-delay), leases whose kept place runs out leave, and the head of the queue is
    /// handed the key at that instant (with every shared waiter behind a shared head, while
    /// places are free), possibly several times in a row. Calling it again with the same or an
    /// earlier `now` does nothing.
    pub fn advance(
        &mut self,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Vec<KeyEvent> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        events
    }

    #[inline]
    fn advance_into(
        &mut self,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
        out: &mut Vec<KeyEvent>,
    ) {
        // The usual case, checked without a call: a free key, or one live lease and nobody
        // waiting.
        let quiet = match (&self.lease, &self.queue, &self.more) {
            (None, _, _) => true,
            (Some(lease), None, None) => lease.deadline > now,
            _ => false,
        };
        if !quiet {
            self.catch_up(now, room, fences, out);
        }
    }

    fn catch_up(
        &mut self,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
        out: &mut Vec<KeyEvent>,
    ) {
        while let Some(at) = self.next_deadline().filter(|&t| t <= now) {
            self.time_out_waiters(at, out);
            self.end_leases(at, out);
            self.hand_off(at, room, fences, out);
        }
        self.tidy();
    }

    fn time_out_waiters(&mut self, at: Instant, out: &mut Vec<KeyEvent>) {
        let Some(queue) = self.queue.as_mut() else {
            return;
        };
        if queue.iter().all(|w| w.wait_deadline > at) {
            return;
        }
        let mut kept = VecDeque::with_capacity(queue.len());
        for w in queue.drain(..) {
            if w.wait_deadline <= at {
                out.push(KeyEvent {
                    at: w.wait_deadline,
                    kind: EventKind::WaitTimedOut {
                        owner: w.owner.as_str().into(),
                    },
                });
            } else {
                kept.push_back(w);
            }
        }
        *queue.as_mut() = kept;
        self.tidy_queue();
    }

    /// Ends the leases whose deadline is `<= at`: a live one expires (an event; it keeps its
    /// place for its lock-delay), a kept place is freed.
    fn end_leases(&mut self, at: Instant, out: &mut Vec<KeyEvent>) {
        if self.more.is_none() {
            // One lease at most: the usual case, without moving it.
            let Some(lease) = self.lease.as_mut().filter(|l| l.deadline <= at) else {
                return;
            };
            if !expire(lease, at, out) {
                self.lease = None;
            }
            return;
        }
        let leases = self.take_leases();
        let kept = leases
            .into_iter()
            .filter_map(|mut l| (l.deadline > at || expire(&mut l, at, out)).then_some(l))
            .collect();
        self.set_leases(kept);
    }

    /// Grants the key at `at` to the head of the queue while it is grantable: one exclusive
    /// waiter, or every shared waiter up to the first exclusive one or the last free place.
    fn hand_off(
        &mut self,
        at: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
        out: &mut Vec<KeyEvent>,
    ) {
        while let Some(mode) = self.queue.as_ref().and_then(|q| q.front()).map(|w| w.mode) {
            if !self.grantable(mode, room) {
                break;
            }
            let Some(waiter) = self.queue.as_mut().and_then(|q| q.pop_front()) else {
                break;
            };
            let fence = fences.next_fence();
            let deadline = at.saturating_add(waiter.ttl);
            let options = waiter.options();
            let lease = new_lease(&waiter.owner, fence, deadline, at, &options, room);
            out.push(KeyEvent {
                at,
                kind: EventKind::Granted {
                    owner: waiter.owner.as_str().into(),
                    fence,
                    deadline,
                    mode,
                    metadata: options.metadata.into(),
                },
            });
            self.push_lease(lease);
        }
        self.tidy_queue();
    }

    fn tidy_queue(&mut self) {
        if self.queue.as_ref().is_some_and(|q| q.is_empty()) {
            self.queue = None;
        }
    }

    fn position_of(&self, owner: &str) -> Option<usize> {
        self.queue
            .as_ref()
            .and_then(|q| q.iter().position(|w| w.owner.is(owner)))
    }

    // ----- requests --------------------------------------------------------------------------

    /// Acquires the key for `owner` with `ttl` and `options`, waiting in the queue while
    /// `now < wait_deadline` if it cannot be granted now. A `wait_deadline` that is not after
    /// `now` makes this a try-acquire: [`LockError::Held`] instead of queueing. `options` must
    /// have passed [`AcquireOptions::validate`].
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        options: &AcquireOptions<'_>,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Transition<AcquireOutcome> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let outcome = self.acquire_now(owner, ttl, wait_deadline, options, now, room, fences);
        Transition { outcome, events }
    }

    #[allow(clippy::too_many_arguments)]
    fn acquire_now(
        &mut self,
        owner: &str,
        ttl: Duration,
        wait_deadline: Instant,
        options: &AcquireOptions<'_>,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Result<AcquireOutcome, LockError> {
        if self.lease.is_none() {
            if options.is_plain() && room.lock_delay.is_zero() {
                // The usual grant: a plain lease on a free key, built in place.
                let deadline = deadline_after(now, ttl)?;
                let lease = Lease {
                    owner: Name::new(owner),
                    fence: fences.next_fence(),
                    deadline,
                    granted_at: now,
                    terms: None,
                };
                let grant = lease.grant();
                self.lease = Some(lease);
                return Ok(AcquireOutcome::Acquired(grant));
            }
            // A free key: granted, with the request's permits.
            let lease = self.grant_now(owner, ttl, options, now, room, fences)?;
            return Ok(AcquireOutcome::Acquired(lease));
        }
        if self.permits() != options.permits {
            return Err(LockError::PermitsMismatch {
                permits: self.permits(),
            });
        }
        if let Some(lease) = self.live_lease_of(owner) {
            return match lease.mode() == options.mode {
                true => Ok(AcquireOutcome::AlreadyHeld(lease.grant())),
                false => Err(LockError::ModeMismatch),
            };
        }
        if let Some(index) = self.position_of(owner) {
            let same_mode = (self.queue.as_ref())
                .and_then(|q| q.get(index))
                .is_some_and(|w| w.mode == options.mode);
            return match same_mode {
                true => Ok(AcquireOutcome::AlreadyWaiting {
                    position: index + 1,
                }),
                false => Err(LockError::ModeMismatch),
            };
        }
        if self.queue.is_none() && self.grantable(options.mode, room) {
            let lease = self.grant_now(owner, ttl, options, now, room, fences)?;
            return Ok(AcquireOutcome::Acquired(lease));
        }
        if wait_deadline <= now {
            return Err(LockError::Held {
                deadline: self.earliest_end(),
            });
        }
        if self.waiter_count() >= room.max_waiters_per_key {
            return Err(LockError::QueueFull {
                max_waiters_per_key: room.max_waiters_per_key,
            });
        }
        if room.waiters_in_table >= room.max_waiters {
            return Err(LockError::TooManyWaiters {
                max_waiters: room.max_waiters,
            });
        }
        let queue = self.queue.get_or_insert_with(Box::default);
        let waiter = Waiter::new(owner, ttl, wait_deadline).with_options(options);
        let alive = now.saturating_add(options.wait_alive);
        queue.push_back(match options.wait_alive.is_zero() {
            true => waiter,
            false => waiter.kept_alive(alive),
        });
        Ok(AcquireOutcome::Queued {
            position: queue.len(),
        })
    }

    /// Grants a new lease at `now` (the caller checked that it may): checks the deadline first,
    /// so a refusal changes nothing.
    fn grant_now(
        &mut self,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Result<Grant, LockError> {
        let deadline = deadline_after(now, ttl)?;
        if self.lease.is_none() && self.queue.is_none() && options.permits != 0 {
            self.more.get_or_insert_with(Box::default).permits = options.permits;
        }
        let lease = new_lease(
            &Name::new(owner),
            fences.next_fence(),
            deadline,
            now,
            options,
            room,
        );
        let grant = lease.grant();
        self.push_lease(lease);
        Ok(grant)
    }

    /// Takes the key now for `owner`, whatever its leases (Web Locks' `steal`, Redisson's
    /// `forceUnlock` then lock): every live lease ends with a [`EventKind::Stolen`] event at
    /// `now` (keeping its place for its lock-delay), every place kept before is freed, and
    /// `owner` gets a new exclusive lease with a fresh fence. The queue is kept (without
    /// `owner`, if it waited). `options` must have passed [`AcquireOptions::validate`]; a steal
    /// is always exclusive.
    ///
    /// # Errors
    /// [`LockError::ModeMismatch`] if `options` ask for shared mode,
    /// [`LockError::PermitsMismatch`] if the key is in use with other permits, or
    /// [`LockError::DeadlineOverflow`]; none of them changes the key.
    pub fn steal(
        &mut self,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Transition<AcquireOutcome> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let outcome = self.steal_now(owner, ttl, options, now, room, fences, &mut events);
        Transition { outcome, events }
    }

    #[allow(clippy::too_many_arguments)]
    fn steal_now(
        &mut self,
        owner: &str,
        ttl: Duration,
        options: &AcquireOptions<'_>,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
        out: &mut Vec<KeyEvent>,
    ) -> Result<AcquireOutcome, LockError> {
        if options.mode != Mode::Exclusive {
            return Err(LockError::ModeMismatch);
        }
        if !self.is_free() && self.permits() != options.permits {
            return Err(LockError::PermitsMismatch {
                permits: self.permits(),
            });
        }
        let deadline = deadline_after(now, ttl)?;
        let kept = (self.take_leases().into_iter())
            .filter(Lease::is_live)
            .filter_map(|mut lease| {
                out.push(KeyEvent {
                    at: now,
                    kind: EventKind::Stolen {
                        owner: lease.owner.as_str().into(),
                        fence: lease.fence,
                        metadata: lease.metadata().into(),
                    },
                });
                let until = now.saturating_add(lease.lock_delay());
                lease.end(LeaseEnd::Stolen, now, until).then_some(lease)
            })
            .collect();
        self.set_leases(kept);
        if let Some(index) = self.position_of(owner) {
            if let Some(queue) = self.queue.as_mut() {
                queue.remove(index);
            }
            self.tidy_queue();
        }
        if options.permits != 0 {
            self.more.get_or_insert_with(Box::default).permits = options.permits;
        }
        let lease = new_lease(
            &Name::new(owner),
            fences.next_fence(),
            deadline,
            now,
            options,
            room,
        );
        let grant = lease.grant();
        self.push_lease(lease);
        Ok(AcquireOutcome::Acquired(grant))
    }

    /// Finds `owner`'s live lease with `fence`, or says why there is none. The checks, in order:
    /// a live lease matches; the lease was lost (expired or stolen, during this call's own
    /// catch-up or per `history`); another owner holds the key; otherwise not held.
    fn find_lease(
        &mut self,
        owner: &str,
        fence: Fence,
        history: &impl ExpiredLeases,
        events: &[KeyEvent],
    ) -> Result<&mut Lease, LockError> {
        let matches = |l: &Lease| l.is_live() && l.fence == fence && l.owner.is(owner);
        if self.lease.as_ref().is_some_and(matches) {
            return self.lease.as_mut().ok_or(LockError::NotHeld);
        }
        let Some(i) = (self.more.as_ref()).and_then(|m| m.leases.iter().position(matches)) else {
            return Err(self.why_not_held(owner, fence, history, events));
        };
        (self.more.as_mut())
            .and_then(|m| m.leases.get_mut(i))
            .ok_or(LockError::NotHeld)
    }

    /// Why `owner` holds no live lease with `fence` (the error path of `find_lease`).
    fn why_not_held(
        &self,
        owner: &str,
        fence: Fence,
        history: &impl ExpiredLeases,
        events: &[KeyEvent],
    ) -> LockError {
        let lost_now = events.iter().find_map(|e| match &e.kind {
            EventKind::Expired {
                owner: o, fence: f, ..
            } if *f == fence && same(o, owner) => Some(LockError::Expired { deadline: e.at }),
            EventKind::Stolen {
                owner: o, fence: f, ..
            } if *f == fence && same(o, owner) => Some(LockError::Stolen { at: e.at }),
            _ => None,
        });
        let live = |l: &&Lease| l.is_live();
        let held_by_other = self.leases().filter(live).any(|l| !l.owner.is(owner))
            && !self.leases().filter(live).any(|l| l.owner.is(owner));
        match lost_now.or_else(|| history.lost(owner, fence)) {
            Some(lost) => lost,
            None if held_by_other => LockError::NotOwner,
            None => LockError::NotHeld,
        }
    }

    /// Releases `owner`'s lease with `fence`. If its minimum hold has not passed, the lease keeps
    /// its place until then ([`ReleaseOutcome::HeldUntil`]); otherwise it ends now and the head
    /// of the queue is handed the key at `now`. Releasing again a lease that keeps its place
    /// answers the same.
    pub fn release(
        &mut self,
        owner: &str,
        fence: Fence,
        now: Instant,
        room: &Room,
        history: &impl ExpiredLeases,
        fences: &mut impl FenceSource,
    ) -> Transition<ReleaseOutcome> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let mine = |l: &Lease| l.fence == fence && l.owner.is(owner);
        if self.one_plain_lease() && self.lease.as_ref().is_some_and(mine) {
            // The usual release: the one plain lease, ended now.
            self.lease = None;
            if self.queue.is_some() {
                self.hand_off(now, room, fences, &mut events);
                self.tidy();
            }
            let outcome = Ok(ReleaseOutcome::Released);
            return Transition { outcome, events };
        }
        if let Some(until) = self.released_early(owner, fence) {
            let outcome = Ok(ReleaseOutcome::HeldUntil { until });
            return Transition { outcome, events };
        }
        let outcome = match self.find_lease(owner, fence, history, &events) {
            Ok(lease) => match lease.min_until().filter(|&m| m > now) {
                Some(until) => {
                    lease.end(LeaseEnd::Released, now, until);
                    Ok(ReleaseOutcome::HeldUntil { until })
                }
                None => {
                    self.remove_lease(fence);
                    self.hand_off(now, room, fences, &mut events);
                    self.tidy();
                    Ok(ReleaseOutcome::Released)
                }
            },
            Err(e) => Err(e),
        };
        Transition { outcome, events }
    }

    /// If `owner`'s lease with `fence` was released before its minimum hold and still keeps its
    /// place: until when (as of the last transition).
    #[must_use]
    #[inline]
    pub fn released_early(&self, owner: &str, fence: Fence) -> Option<Instant> {
        if self.one_plain_lease() {
            return None;
        }
        self.leases()
            .find(|l| {
                l.ended() == Some(LeaseEnd::Released) && l.fence == fence && l.owner.is(owner)
            })
            .map(|l| l.deadline)
    }

    /// Removes the lease with `fence`.
    fn remove_lease(&mut self, fence: Fence) {
        if self.more.is_none() {
            if self.lease.as_ref().is_some_and(|l| l.fence == fence) {
                self.lease = None;
            }
            return;
        }
        let mut leases = self.take_leases();
        leases.retain(|l| l.fence != fence);
        self.set_leases(leases);
    }

    /// Moves the deadline of `owner`'s live lease with `fence` to `now + ttl` (earlier or later,
    /// but never before its minimum hold); the fence stays the same.
    #[allow(clippy::too_many_arguments)]
    pub fn extend(
        &mut self,
        owner: &str,
        fence: Fence,
        ttl: Duration,
        now: Instant,
        room: &Room,
        history: &impl ExpiredLeases,
        fences: &mut impl FenceSource,
    ) -> Transition<Grant> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let outcome = self
            .find_lease(owner, fence, history, &events)
            .and_then(|lease| {
                let deadline = deadline_after(now, ttl)?;
                lease.deadline = lease.min_until().map_or(deadline, |m| deadline.max(m));
                Ok(lease.grant())
            });
        Transition { outcome, events }
    }

    /// Keeps `owner`'s place in the queue alive: moves its wait deadline to `wait_deadline` if
    /// that is later (never earlier). A waiting client that renews now and then, with a deadline a
    /// short while ahead, stays in line as long as it lives; if it dies, its wait times out soon
    /// after its last renewal and the queue moves on without handing the key to a dead waiter.
    ///
    /// A waiter queued with a [`wait_alive`](AcquireOptions::wait_alive) says the end of its
    /// whole wait instead: that end moves to `wait_deadline` if later, and its place is kept to
    /// `now + wait_alive`, never past that end (never earlier than it was), so inspection shows
    /// the wait it asked for while the table still drops it soon after it stops renewing.
    ///
    /// Answers [`AcquireOutcome::AlreadyWaiting`] with its place, or
    /// [`AcquireOutcome::AlreadyHeld`] if the key was handed to `owner` meanwhile (so the waiter
    /// learns of its grant from the renewal).
    ///
    /// # Errors
    /// [`LockError::NotWaiting`] if `owner` neither waits for nor holds the key (its wait timed
    /// out or was cancelled, or its lease ended).
    pub fn renew_wait(
        &mut self,
        owner: &str,
        wait_deadline: Instant,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Transition<AcquireOutcome> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let outcome = match (self.live_lease_of(owner), self.position_of(owner)) {
            (Some(lease), _) => Ok(AcquireOutcome::AlreadyHeld(lease.grant())),
            (None, Some(index)) => {
                if let Some(waiter) = self.queue.as_mut().and_then(|q| q.get_mut(index)) {
                    waiter.renew(wait_deadline, now);
                }
                Ok(AcquireOutcome::AlreadyWaiting {
                    position: index + 1,
                })
            }
            (None, None) => Err(LockError::NotWaiting),
        };
        Transition { outcome, events }
    }

    /// Takes every waiter out of the queue (as a `cancel_wait` each, after applying time up to
    /// `now`); the outcome is how many left.
    pub fn cancel_all_waits(
        &mut self,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Transition<usize> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let outcome = Ok(self.queue.take().map_or(0, |q| q.len()));
        self.tidy();
        Transition { outcome, events }
    }

    /// Takes `owner` out of the wait queue; if the new head can be granted (shared waiters
    /// behind an exclusive one that left), it is handed the key at `now`.
    pub fn cancel_wait(
        &mut self,
        owner: &str,
        now: Instant,
        room: &Room,
        fences: &mut impl FenceSource,
    ) -> Transition<()> {
        let mut events = Vec::new();
        self.advance_into(now, room, fences, &mut events);
        let outcome = match (self.position_of(owner), self.queue.as_mut()) {
            (Some(index), Some(queue)) => {
                queue.remove(index);
                self.hand_off(now, room, fences, &mut events);
                self.tidy();
                Ok(())
            }
            _ => Err(LockError::NotWaiting),
        };
        Transition { outcome, events }
    }
}

/// A live lease granted at `at` with `options`, keeping at least the table's lock-delay.
fn new_lease(
    owner: &Name,
    fence: Fence,
    deadline: Instant,
    at: Instant,
    options: &AcquireOptions<'_>,
    room: &Room,
) -> Lease {
    let lock_delay = options.lock_delay.max(room.lock_delay);
    let min_until =
        (!options.min_hold.is_zero()).then(|| at.saturating_add(options.min_hold).min(deadline));
    let lease = Lease {
        owner: owner.clone(),
        fence,
        deadline,
        granted_at: at,
        terms: None,
    };
    if options.mode == Mode::Exclusive
        && options.metadata.is_empty()
        && min_until.is_none()
        && lock_delay.is_zero()
    {
        return lease;
    }
    lease.with_terms(options.mode, options.metadata, min_until, lock_delay)
}

/// Ends a lease whose deadline is `<= at`: a live one expires (an event at its deadline) and
/// keeps its place for its lock-delay; a kept place is freed. Returns whether it stays.
fn expire(lease: &mut Lease, at: Instant, out: &mut Vec<KeyEvent>) -> bool {
    if !lease.is_live() {
        return false;
    }
    out.push(KeyEvent {
        at: lease.deadline,
        kind: EventKind::Expired {
            owner: lease.owner.as_str().into(),
            fence: lease.fence,
            metadata: lease.metadata().into(),
        },
    });
    let until = lease.deadline.saturating_add(lease.lock_delay());
    lease.end(LeaseEnd::Expired, at, until)
}

/// A set of owners by hash, for the checks of a decoded key that would otherwise compare every
/// pair of its holders or waiters.
struct NameSet<'a> {
    hasher: FixedState,
    names: HashTable<(u64, &'a [u8])>,
}

impl<'a> NameSet<'a> {
    fn with_capacity(n: usize) -> Self {
        NameSet {
            hasher: FixedState::with_seed(0),
            names: HashTable::with_capacity(n),
        }
    }

    fn contains(&self, name: &[u8]) -> bool {
        let hash = hash_name(&self.hasher, name);
        self.names.find(hash, |&(_, n)| n == name).is_some()
    }

    /// Adds `name`: `false` if it was in already.
    fn insert(&mut self, name: &'a [u8]) -> bool {
        let hash = hash_name(&self.hasher, name);
        if self.names.find(hash, |&(_, n)| n == name).is_some() {
            return false;
        }
        self.names.insert_unique(hash, (hash, name), |&(h, _)| h);
        true
    }
}

/// One held key: its name and its state.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) key: Name,
    pub(crate) state: KeyState,
}

// A held key in the table: its name (24 bytes on 64-bit) and its state; with its timer (24
// bytes), heap position and hash index, what one live lease costs (docs/bench-core.md).
const _: () = assert!(core::mem::size_of::<Record>() <= 96);
