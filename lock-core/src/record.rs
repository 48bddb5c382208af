//! One key kept in a shared store: [`KeyRecord`], its transitions and its byte format.
//!
//! A store (Redis, PostgreSQL, MariaDB, SQLite, another process's memory) keeps one record per
//! key and knows nothing of what is in it. A client reads the record and the store's time, runs
//! one transition here, and writes the record back only if nobody wrote it in between
//! (compare-and-set on a version the store keeps next to the bytes). The rules are the
//! [`KeyState`] rules the in-process [`LockTable`](crate::LockTable) runs, plus what the table
//! keeps for the key: a per-key clock (time never runs backwards for a key) and the key's
//! recently expired leases (so a late release answers [`LockError::Expired`]).
//!
//! # Fences
//! A transition cannot know the namespace's next fencing token: another key may take one between
//! the read and the write. So a transition that grants names its new tokens *provisionally*
//! ([`Step::fresh_fences`] of them, numbered from [`PROVISIONAL_BASE`]). The store allocates that
//! many real tokens from its counter in the same atomic step as the write, keeps them next to the
//! bytes, and returns them; [`KeyRecord::decode`] and [`Step::settle`] replace the provisional
//! names with them. The store never looks inside the bytes.
//!
//! # Byte formats (versions 1 to 3, little-endian)
//! ```text
//! magic "LOCKKREC", version u16 (1 to 3), body_len u32, body, crc32 u32 (of everything before)
//! version 1 body: clock u64,
//!       has_lease u8 (0 or 1), [owner str, fence u64, deadline u64],
//!       waiter_count u32, per waiter: owner str, ttl u64, wait_deadline u64,
//!       expired_count u32, per expired lease, oldest first: owner str, fence u64, deadline u64
//! version 2 and 3 body: clock u64,
//!       the key's leases and waiters in that version (permits, leases with mode, end, metadata,
//!       minimum hold, lock-delay and, from version 3, grant instant; waiters with their
//!       options: see the crate's key_codec),
//!       expired_count u32, per lost lease, oldest first: owner str, fence u64,
//!       deadline u64 (or the instant of the steal), stolen u8
//! str = u32 byte length + UTF-8 bytes; a fence >= 2^62 is provisional (see above)
//! ```
//! Every record is written in version 3 (a lease's grant instant, which version 1 and 2 cannot
//! hold, is part of every key) and every version is read: a lease read from version 1 or 2 has
//! no known grant instant, and is written back in version 3 with none. A client meets a newer
//! version than it reads as [`LockError::SnapshotVersion`] naming both, and never writes over
//! it.
//! Decoding is strict: a bad frame, a broken invariant or a provisional fence the store did not
//! allocate is a [`LockError`] (the snapshot errors), never a silently reset key.
//!
//! ```
//! use lock_core::{Duration, Fence, Instant, KeyRecord, Limits, Request, Response, AcquireOutcome, Grant};
//!
//! let limits = Limits::default();
//! let mut record = KeyRecord::new();
//! let request = Request::TryAcquire { key: "job", owner: "a", ttl: Duration(100), now: Instant(0) };
//! let mut step = record.handle(request, &limits);
//! assert!(step.changed);
//! assert_eq!(step.fresh_fences, 1);
//! let bytes = record.encode(); // written with compare-and-set; the store allocates fence 7
//! step.settle(&[Fence(7)]);
//! assert_eq!(step.reply, Response::Acquire(Ok(AcquireOutcome::Acquired(Grant {
//!     fence: Fence(7), deadline: Instant(100) }))));
//! // The next reader decodes the bytes with the fences the store kept next to them.
//! let again = KeyRecord::decode(&bytes, &[Fence(7)], &limits)?;
//! assert_eq!(again.state().lease().map(|l| l.fence()), Some(Fence(7)));
//! # Ok::<(), lock_core::LockError>(())
//! ```

use alloc::vec::Vec;

use crate::frame::{against_limits, close_frame, corrupt, open_frame, start_frame, Reader};
use crate::key_codec::{read_flag, read_key, write_key, KEY_VERSION};
use crate::key_state::{ExpiredLeases, FenceSource, KeyState, Lease, Room, Waiter};
use crate::stored_name::Name;
use crate::{
    AcquireOptions, AcquireOutcome, Corruption, Duration, EventKind, Fence, Grant, Instant,
    KeyEvent, KeyInfo, LimitName, Limits, LockError, Request, Response,
};

/// The magic bytes that open every key record.
pub const RECORD_MAGIC: [u8; 8] = *b"LOCKKREC";
/// The record format version this build writes, the newest it reads (it reads every version
/// from 1).
pub const RECORD_VERSION: u16 = KEY_VERSION;
/// Provisional fences are `PROVISIONAL_BASE + i` for the `i`-th fresh token of a transition.
/// Real tokens of a store stay below 2^53, so the two ranges never meet.
pub const PROVISIONAL_BASE: u64 = 1 << 62;

/// A lease of this key that was lost (ran out or was stolen), remembered for
/// `expired_retention`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ExpiredLease {
    owner: Name,
    fence: Fence,
    /// When it was lost: its deadline, or the instant of the steal.
    deadline: Instant,
    stolen: bool,
}

/// One key as a store keeps it: its [`KeyState`], its clock and its recently expired leases.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyRecord {
    clock: Instant,
    state: KeyState,
    expired: Vec<ExpiredLease>,
}

/// The result of one transition of a [`KeyRecord`].
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step<R> {
    /// The answer (with provisional fences until [`settle`](Step::settle)).
    pub reply: R,
    /// Time-driven events and hand-offs of this key, oldest first.
    pub events: Vec<KeyEvent>,
    /// The record changed: the answer holds only once the new record is written with
    /// compare-and-set. `false` means nothing needs writing (refusals, reads, repeats).
    pub changed: bool,
    /// How many fresh fencing tokens the write must allocate, in order.
    pub fresh_fences: usize,
}

/// Answers provisional fences `PROVISIONAL_BASE + i` with fresh token `i`.
#[derive(Default)]
struct Provisional {
    issued: u64,
}

impl FenceSource for Provisional {
    fn next_fence(&mut self) -> Fence {
        self.issued += 1;
        Fence(PROVISIONAL_BASE + self.issued - 1)
    }
}

/// The real token for `fence`: itself if it is not provisional, else the store's fresh token
/// (`None` if the store did not allocate that many).
fn settled(fence: Fence, fresh: &[Fence]) -> Option<Fence> {
    match fence.0.checked_sub(PROVISIONAL_BASE) {
        None => Some(fence),
        Some(i) => usize::try_from(i).ok().and_then(|i| fresh.get(i)).copied(),
    }
}

fn settle_or_keep(fence: &mut Fence, fresh: &[Fence]) {
    if let Some(real) = settled(*fence, fresh) {
        *fence = real;
    }
}

fn settle_grant(grant: &mut Grant, fresh: &[Fence]) {
    settle_or_keep(&mut grant.fence, fresh);
}

fn settle_events(events: &mut [KeyEvent], fresh: &[Fence]) {
    for event in events {
        match &mut event.kind {
            EventKind::Granted { fence, .. }
            | EventKind::Expired { fence, .. }
            | EventKind::Stolen { fence, .. } => {
                settle_or_keep(fence, fresh);
            }
            EventKind::WaitTimedOut { .. } => {}
        }
    }
}

impl Step<Response> {
    /// Replaces provisional fences in the answer and events with the store's fresh tokens.
    pub fn settle(&mut self, fresh: &[Fence]) {
        match &mut self.reply {
            Response::Acquire(Ok(AcquireOutcome::Acquired(g) | AcquireOutcome::AlreadyHeld(g)))
            | Response::Extend(Ok(g)) => settle_grant(g, fresh),
            _ => {}
        }
        settle_events(&mut self.events, fresh);
    }
}

impl Step<Result<Option<KeyInfo>, LockError>> {
    /// Replaces provisional fences in the answer and events with the store's fresh tokens.
    pub fn settle(&mut self, fresh: &[Fence]) {
        if let Ok(Some(info)) = &mut self.reply {
            for holder in &mut info.holders {
                settle_or_keep(&mut holder.fence, fresh);
            }
        }
        settle_events(&mut self.events, fresh);
    }
}

/// The key's own expired leases as [`ExpiredLeases`].
struct History<'a>(&'a [ExpiredLease]);

impl ExpiredLeases for History<'_> {
    fn lost(&self, owner: &str, fence: Fence) -> Option<LockError> {
        (self.0.iter())
            .find(|e| e.fence == fence && e.owner.is(owner))
            .map(|e| match e.stolen {
                true => LockError::Stolen { at: e.deadline },
                false => LockError::Expired {
                    deadline: e.deadline,
                },
            })
    }
}

impl KeyRecord {
    /// A key nobody has used: free, clock 0, nothing remembered.
    #[must_use]
    pub fn new() -> Self {
        KeyRecord::default()
    }

    /// The latest `now` applied to this key.
    #[must_use]
    pub fn clock(&self) -> Instant {
        self.clock
    }

    /// The key's lease and waiters.
    #[must_use]
    pub fn state(&self) -> &KeyState {
        &self.state
    }

    /// True when the record holds nothing: no lease and no remembered expiry. A store may
    /// delete it (absent and empty records behave the same).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.state.is_free() && self.expired.is_empty()
    }

    /// When the record will hold nothing by time alone, if nobody touches it: `None` while a
    /// lease is held; else the end of the last expired lease's retention (the clock if none).
    /// A store may garbage-collect the record from then on.
    #[must_use]
    pub fn forget_at(&self, limits: &Limits) -> Option<Instant> {
        if !self.state.is_free() {
            return None;
        }
        let last = self.expired.iter().map(|e| e.deadline).max();
        Some(last.map_or(self.clock, |d| {
            d.saturating_add(limits.expired_retention).max(self.clock)
        }))
    }

    /// How many expired leases of this key are still remembered at `now`.
    #[must_use]
    pub fn remembered_expiries(&self, now: Instant, limits: &Limits) -> usize {
        let retention = limits.expired_retention;
        (self.expired.iter())
            .filter(|e| e.deadline.saturating_add(retention) > now)
            .count()
            .min(limits.max_expired_records)
    }

    /// The earliest instant at which this key changes by time alone (see
    /// [`KeyState::next_deadline`]).
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.state.next_deadline()
    }

    /// The latest instant at which a lease of this key still holds or keeps its place (see
    /// [`KeyState::holds_until`]); `None` if the key is free.
    #[must_use]
    pub fn holds_until(&self) -> Option<Instant> {
        self.state.holds_until()
    }

    /// Runs one request on this key (its `key` field is validated, not looked up: the record is
    /// the key's). [`Request::HandleTimeout`] applies time alone, as a table's timer would for this
    /// key. Validation errors change nothing.
    pub fn handle(&mut self, request: Request<'_>, limits: &Limits) -> Step<Response> {
        if let Err(e) = request.validate(limits) {
            return Step {
                reply: refusal(&request, e),
                events: Vec::new(),
                changed: false,
                fresh_fences: 0,
            };
        }
        let now = request.now();
        let mut fences = Provisional::default();
        let (now, mut events, mut changed) = self.advance(now, limits, &mut fences);
        let room = Room::of(limits, self.state.waiter_count());
        let history = History(&self.expired);
        let plain = AcquireOptions::EXCLUSIVE;
        let (reply, transition_events) = match request {
            Request::TryAcquire { owner, ttl, .. } => {
                let t = (self.state).acquire(
                    owner,
                    ttl,
                    Instant::ZERO,
                    &plain,
                    now,
                    &room,
                    &mut fences,
                );
                changed |= matches!(t.outcome, Ok(AcquireOutcome::Acquired(_)));
                (Response::Acquire(t.outcome), t.events)
            }
            Request::Acquire {
                owner,
                ttl,
                wait_deadline,
                ..
            } => {
                let t = (self.state).acquire(
                    owner,
                    ttl,
                    wait_deadline,
                    &plain,
                    now,
                    &room,
                    &mut fences,
                );
                changed |= matches!(
                    t.outcome,
                    Ok(AcquireOutcome::Acquired(_) | AcquireOutcome::Queued { .. })
                );
                (Response::Acquire(t.outcome), t.events)
            }
            Request::AcquireWith {
                owner,
                ttl,
                wait_deadline,
                options,
                ..
            } => {
                let t = (self.state).acquire(
                    owner,
                    ttl,
                    wait_deadline,
                    &options,
                    now,
                    &room,
                    &mut fences,
                );
                changed |= matches!(
                    t.outcome,
                    Ok(AcquireOutcome::Acquired(_) | AcquireOutcome::Queued { .. })
                );
                (Response::Acquire(t.outcome), t.events)
            }
            Request::Steal {
                owner,
                ttl,
                options,
                ..
            } => {
                let t = (self.state).steal(owner, ttl, &options, now, &room, &mut fences);
                changed |= t.outcome.is_ok();
                (Response::Acquire(t.outcome), t.events)
            }
            Request::Release { owner, fence, .. } => {
                // Releasing again a lease that keeps its place (a minimum hold) changes nothing.
                let kept = self.state.released_early(owner, fence).is_some();
                let t = (self.state).release(owner, fence, now, &room, &history, &mut fences);
                changed |= t.outcome.is_ok() && !kept;
                (Response::Release(t.outcome), t.events)
            }
            Request::Extend {
                owner, fence, ttl, ..
            } => {
                let t = (self.state).extend(owner, fence, ttl, now, &room, &history, &mut fences);
                changed |= t.outcome.is_ok();
                (Response::Extend(t.outcome), t.events)
            }
            Request::CancelWait { owner, .. } => {
                let t = self.state.cancel_wait(owner, now, &room, &mut fences);
                changed |= t.outcome.is_ok();
                (Response::Done(t.outcome), t.events)
            }
            Request::RenewWait {
                owner,
                wait_deadline,
                ..
            } => {
                // Only a waiter's instants moved later change the record (time was applied
                // above, so the renewal itself moves nothing else): its place's end, or the end
                // of its wait (a waiter kept alive moves its place even when the end it names
                // is not later).
                let instants = |state: &KeyState| {
                    (state.waiters())
                        .find(|w| w.owner() == owner)
                        .map(|w| (w.wait_deadline(), w.wait_end()))
                };
                let before = instants(&self.state);
                let t = (self.state).renew_wait(owner, wait_deadline, now, &room, &mut fences);
                changed |= matches!(t.outcome, Ok(AcquireOutcome::AlreadyWaiting { .. }))
                    && before != instants(&self.state);
                (Response::Acquire(t.outcome), t.events)
            }
            Request::HandleTimeout { .. } => (Response::Timeout, Vec::new()),
        };
        changed |= !transition_events.is_empty();
        self.remember(&transition_events, limits);
        events.extend(transition_events);
        Step {
            reply,
            events,
            changed,
            fresh_fences: fences.issued as usize,
        }
    }

    /// The key's holder and waiters at `now`, or `None` if it is free. Applies time up to `now`
    /// first (which may change the record: an expiry, a hand-off).
    pub fn inspect(
        &mut self,
        key: &str,
        now: Instant,
        limits: &Limits,
    ) -> Step<Result<Option<KeyInfo>, LockError>> {
        if let Err(e) = limits.check_key(key) {
            return Step {
                reply: Err(e),
                events: Vec::new(),
                changed: false,
                fresh_fences: 0,
            };
        }
        let mut fences = Provisional::default();
        let (_, events, changed) = self.advance(now, limits, &mut fences);
        Step {
            reply: Ok(self.state.info()),
            events,
            changed,
            fresh_fences: fences.issued as usize,
        }
    }

    /// Moves the clock to `now` (never back), applies time-driven changes, remembers expired
    /// leases and forgets old ones. Returns the clock, the events and whether the key changed.
    /// Forgetting alone is not a change worth a write: any later reader forgets them too.
    fn advance(
        &mut self,
        now: Instant,
        limits: &Limits,
        fences: &mut Provisional,
    ) -> (Instant, Vec<KeyEvent>, bool) {
        let now = self.clock.max(now);
        self.clock = now;
        let room = Room::of(limits, self.state.waiter_count());
        // Something changes by time alone exactly when the key's next deadline has come; not
        // always with an event (a place kept by an ended lease is freed quietly).
        let changed = self.state.next_deadline().is_some_and(|at| at <= now);
        let events = self.state.advance(now, &room, fences);
        self.remember(&events, limits);
        let retention = limits.expired_retention;
        self.expired
            .retain(|e| e.deadline.saturating_add(retention) > now);
        (now, events, changed)
    }

    /// Remembers the leases that `events` say were lost (expired or stolen), within the limits.
    fn remember(&mut self, events: &[KeyEvent], limits: &Limits) {
        if limits.max_expired_records == 0 || limits.expired_retention.is_zero() {
            return;
        }
        for event in events {
            let (owner, fence, stolen) = match &event.kind {
                EventKind::Expired { owner, fence, .. } => (owner, fence, false),
                EventKind::Stolen { owner, fence, .. } => (owner, fence, true),
                _ => continue,
            };
            self.expired.push(ExpiredLease {
                owner: Name::new(owner),
                fence: *fence,
                deadline: event.at,
                stolen,
            });
        }
        let cap = limits.max_expired_records;
        if self.expired.len() > cap {
            self.expired.drain(..self.expired.len() - cap);
        }
    }

    /// Replaces provisional fences in the record with the store's fresh tokens, once the write
    /// that allocated them succeeded (so a cached record holds real tokens).
    pub fn settle(&mut self, fresh: &[Fence]) {
        self.state.map_fence(|f| settled(f, fresh).unwrap_or(f));
        for e in &mut self.expired {
            settle_or_keep(&mut e.fence, fresh);
        }
    }

    /// The record's bytes in the newest version, [`RECORD_VERSION`] (see the module docs).
    /// Provisional fences are written as they are.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut w = start_frame(&RECORD_MAGIC, RECORD_VERSION, 64);
        w.u64(self.clock.0);
        write_key(&mut w, &self.state);
        w.len(self.expired.len());
        for e in &self.expired {
            w.str(e.owner.as_str());
            w.u64(e.fence.0);
            w.u64(e.deadline.0);
            w.0.push(u8::from(e.stolen));
        }
        close_frame(w)
    }

    /// Reads a record written by [`encode`](Self::encode) in any version this build knows, with
    /// `fresh`, the tokens the store allocated for its provisional fences.
    ///
    /// # Errors
    /// The snapshot errors: [`LockError::SnapshotBadMagic`], `SnapshotVersion` (a record of a
    /// newer format, written by a newer client: never write over it), `SnapshotTruncated`,
    /// `SnapshotChecksum`, `SnapshotCorrupt` (a broken invariant, or a provisional fence the
    /// store did not allocate), `SnapshotExceedsLimits` (written under larger limits).
    pub fn decode(bytes: &[u8], fresh: &[Fence], limits: &Limits) -> Result<Self, LockError> {
        let (version, body) = open_frame(bytes, &RECORD_MAGIC, RECORD_VERSION)?;
        let mut r = Reader { rest: body };
        let record = decode_body(&mut r, fresh, limits, version)?;
        if !r.rest.is_empty() {
            return Err(corrupt(Corruption::BodyTooLong));
        }
        Ok(record)
    }
}

fn real_fence(fence: Fence, fresh: &[Fence], bad: Corruption) -> Result<Fence, LockError> {
    match settled(fence, fresh) {
        Some(f) if f != Fence::ZERO && f.0 < PROVISIONAL_BASE => Ok(f),
        _ => Err(corrupt(bad)),
    }
}

fn decode_body(
    r: &mut Reader<'_>,
    fresh: &[Fence],
    limits: &Limits,
    version: u16,
) -> Result<KeyRecord, LockError> {
    let clock = r.instant()?;
    let state = match version {
        1 => decode_key_v1(r, fresh, limits, clock)?,
        _ => read_key(r, version, limits, clock, |f| {
            real_fence(f, fresh, Corruption::LeaseFenceNotIssued)
        })?,
    };
    let expired_count = r.count(4 + 1 + 8 + 8)?;
    let mut expired: Vec<ExpiredLease> = Vec::with_capacity(expired_count);
    for _ in 0..expired_count {
        let owner = r.str()?;
        against_limits(limits.check_owner(owner))?;
        let fence = real_fence(r.fence()?, fresh, Corruption::ExpiredFenceInvalid)?;
        let deadline = r.instant()?;
        let stolen = version >= 2 && read_flag(r)?;
        let live = |l: &Lease| l.fence() == fence && l.ended().is_none();
        if state.leases().any(live) || expired.iter().any(|e| e.fence == fence) {
            return Err(corrupt(Corruption::ExpiredShareFence));
        }
        if deadline > clock || expired.last().is_some_and(|p| p.deadline > deadline) {
            return Err(corrupt(Corruption::ExpiredOutOfOrder));
        }
        expired.push(ExpiredLease {
            owner: Name::new(owner),
            fence,
            deadline,
            stolen,
        });
    }
    Ok(KeyRecord {
        clock,
        state,
        expired,
    })
}

/// The lease and waiters of a version 1 record.
fn decode_key_v1(
    r: &mut Reader<'_>,
    fresh: &[Fence],
    limits: &Limits,
    clock: Instant,
) -> Result<KeyState, LockError> {
    let lease = match r.take(1)?[0] {
        0 => None,
        1 => {
            let owner = r.str()?;
            against_limits(limits.check_owner(owner))?;
            let fence = real_fence(r.fence()?, fresh, Corruption::LeaseFenceNotIssued)?;
            Some(Lease::new(owner, fence, r.instant()?))
        }
        _ => return Err(corrupt(Corruption::BodyEndsEarly)),
    };
    let waiter_count = r.count(4 + 1 + 8 + 8)?;
    if waiter_count > limits.max_waiters_per_key {
        return Err(LockError::SnapshotExceedsLimits {
            limit: LimitName::MaxWaitersPerKey,
        });
    }
    let mut waiters = Vec::with_capacity(waiter_count);
    for _ in 0..waiter_count {
        let owner = r.str()?;
        against_limits(limits.check_owner(owner))?;
        let ttl: Duration = r.duration()?;
        against_limits(limits.check_ttl(ttl))?;
        waiters.push(Waiter::new(owner, ttl, r.instant()?));
    }
    let room = Room::of(limits, 0);
    KeyState::from_parts(lease.into_iter().collect(), waiters, 0, clock, &room).map_err(corrupt)
}

/// The refusal of `request` with `error`, in the request's response shape.
fn refusal(request: &Request<'_>, error: LockError) -> Response {
    match request {
        Request::TryAcquire { .. }
        | Request::Acquire { .. }
        | Request::AcquireWith { .. }
        | Request::Steal { .. }
        | Request::RenewWait { .. } => Response::Acquire(Err(error)),
        Request::Release { .. } => Response::Release(Err(error)),
        Request::CancelWait { .. } => Response::Done(Err(error)),
        Request::Extend { .. } => Response::Extend(Err(error)),
        Request::HandleTimeout { .. } => Response::Timeout,
    }
}
