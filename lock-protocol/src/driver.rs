//! The protocol for drivers, sans IO: the npm package's store clients drive it through the
//! package's WebAssembly engine, so that a Node replica reads, decides, writes, re-reads after a
//! conflict or a lost answer, bounds the store's clock, waits and gives up exactly as a Rust
//! replica does, on the same records. Nothing here does IO or reads a
//! clock: the driver sends the reads and compare-and-sets [`Next`] asks for, notes the local
//! instants (its own monotonic clock, as a [`LocalInstant`]) at which each left and was
//! answered, and hands the answers back.
//!
//! ```
//! use lock_protocol::decided::TimeSource;
//! use lock_protocol::driver::{Client, LocalInstant, Next, Op};
//! use lock_protocol::records::{Read, Written};
//! use lock_core::{Fence, Instant, Limits};
//!
//! let mut client = Client::new("memory: namespace \"jobs\"", Limits::default(), TimeSource::Store, 7)?;
//! let t = LocalInstant::from_nanos(1_000_000);
//! let op = Op::TryAcquire { owner: "a".into(), ttl: lock_protocol::driver::Duration(5_000) };
//! let mut call = client.call("k", op, Instant::ZERO, t);
//! // No record remembered: a read first; the store answers nothing there at its time 9 000.
//! assert!(matches!(client.poll(&mut call, t)?, Next::Read));
//! client.handle_read(&mut call, Ok(Read { record: None, now: Instant(9_000) }), t, t)?;
//! // Then one compare-and-set, which the store does, allocating one fencing token.
//! let Next::Write(write) = client.poll(&mut call, t)? else { panic!() };
//! assert_eq!((write.expected, write.fresh_fences), (0, 1));
//! let done = Written::Done { fences: vec![Fence(41)] };
//! client.handle_written(&mut call, Ok(done), t)?;
//! assert!(matches!(client.poll(&mut call, t)?, Next::Done));
//! let outcome = client.finish(call)?;
//! assert_eq!(outcome.decided.now, Instant(9_000));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration as StdDuration;

use lock_core::{Fence, Instant, KeyRecord, Limits, LockError, Reply, Request, Response, Step};

pub use crate::kinds::OwnedOptions;
pub use crate::local::LocalInstant;
pub use crate::queue::Asking;
pub use lock_core::Duration;

use crate::clock::local_end;
use crate::decided::{refuse_invalid, Decided, TimeSource};
use crate::decider::{Decider, InspectReply, Native};
use crate::error::Error;
use crate::error::StoreError;
use crate::exchange::{stopped, Exchange, Io, Memory, Stop};
use crate::queue::{Acquiring, Granted, Want};
use crate::records::{Read, Write, Written};

/// One operation on one key, owned (the driver's call, before it is decided).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `try-acquire`.
    TryAcquire {
        /// Who asks.
        owner: String,
        /// The lease's length.
        ttl: Duration,
    },
    /// `acquire`, queueing until `wait_deadline` (store's time) if the key is held.
    Acquire {
        /// Who asks.
        owner: String,
        /// The lease's length.
        ttl: Duration,
        /// The end of the wait (store's time).
        wait_deadline: Instant,
    },
    /// `acquire-with`: an acquire with the lock kinds' options (a try when `wait_deadline` is not
    /// after the store's now).
    AcquireWith {
        /// Who asks.
        owner: String,
        /// The lease's length.
        ttl: Duration,
        /// The end of the wait (store's time).
        wait_deadline: Instant,
        /// Shared mode and permits, minimum hold, lock-delay, metadata.
        options: OwnedOptions,
    },
    /// `steal`: take the key now whatever its holders.
    Steal {
        /// Who takes it.
        owner: String,
        /// The lease's length.
        ttl: Duration,
        /// Its options (exclusive only).
        options: OwnedOptions,
    },
    /// `release` of the lease with `fence`.
    Release {
        /// The holder.
        owner: String,
        /// The lease's token.
        fence: Fence,
    },
    /// `extend` the lease with `fence` to `now + ttl`.
    Extend {
        /// The holder.
        owner: String,
        /// The lease's token.
        fence: Fence,
        /// The new length from now.
        ttl: Duration,
    },
    /// `cancel-wait`: leave the key's queue.
    CancelWait {
        /// The waiter.
        owner: String,
    },
    /// `renew-wait`: keep a queued wait alive until `wait_deadline`.
    RenewWait {
        /// The waiter.
        owner: String,
        /// The new end of the wait (store's time).
        wait_deadline: Instant,
    },
    /// `handle-timeout`: apply time alone (the key's own timer).
    HandleTimeout,
    /// `inspect`: the key's holder and waiters (applying time first).
    Inspect,
    /// What a waiting caller asks next (see [`Waiting`]), decided at the store's time.
    Ask {
        /// The waiter.
        owner: String,
        /// The request, apart from the key, the owner and the store's time.
        asking: Asking,
    },
}

impl Op {
    /// The request this operation makes on `key` at `now` (`None` for [`Op::Inspect`]).
    fn request<'a>(&'a self, key: &'a str, now: Instant) -> Option<Request<'a>> {
        Some(match self {
            Op::TryAcquire { owner, ttl } => Request::TryAcquire {
                key,
                owner,
                ttl: *ttl,
                now,
            },
            Op::Acquire {
                owner,
                ttl,
                wait_deadline,
            } => Request::Acquire {
                key,
                owner,
                ttl: *ttl,
                wait_deadline: *wait_deadline,
                now,
            },
            Op::AcquireWith {
                owner,
                ttl,
                wait_deadline,
                options,
            } => Request::AcquireWith {
                key,
                owner,
                ttl: *ttl,
                wait_deadline: *wait_deadline,
                options: options.core(),
                now,
            },
            Op::Steal {
                owner,
                ttl,
                options,
            } => Request::Steal {
                key,
                owner,
                ttl: *ttl,
                options: options.core(),
                now,
            },
            Op::Release { owner, fence } => Request::Release {
                key,
                owner,
                fence: *fence,
                now,
            },
            Op::Extend { owner, fence, ttl } => Request::Extend {
                key,
                owner,
                fence: *fence,
                ttl: *ttl,
                now,
            },
            Op::CancelWait { owner } => Request::CancelWait { key, owner, now },
            Op::RenewWait {
                owner,
                wait_deadline,
            } => Request::RenewWait {
                key,
                owner,
                wait_deadline: *wait_deadline,
                now,
            },
            Op::HandleTimeout => Request::HandleTimeout { now },
            Op::Ask { owner, asking } => asking.request(key, owner, now),
            Op::Inspect => return None,
        })
    }
}

/// What the driver does next for a [`Call`].
#[derive(Debug)]
pub enum Next<'a> {
    /// Read the key's record with the store's time; hand the answer to
    /// [`Client::handle_read`] with the local instants the request left and the answer came.
    Read,
    /// Send this compare-and-set; hand the answer to [`Client::handle_written`]. A write whose
    /// answer was lost (the connection failed after the request may have left) is
    /// [`StoreError::Lost`]: the call resolves it by reading.
    Write(Write<'a>),
    /// Wait this long (the pause after a conflict), then poll again.
    Pause(StdDuration),
    /// Over: [`Client::finish`] the call.
    Done,
}

/// The exchange of one call, by the shape of its answer.
enum Running {
    Inspect(Exchange<Native, InspectReply>),
    /// One request, or several decided together, each on the record the one before it left
    /// (see [`Client::call_together`]): one shape for both keeps the engine one exchange
    /// smaller.
    Together(Exchange<Native, Vec<Step<lock_core::Response>>>),
}

/// One call on one key in progress (see [`Client::call`]).
pub struct Call {
    key: String,
    op: Op,
    /// The operations decided after `op`, together with it ([`Client::call_together`]).
    rest: Vec<Op>,
    running: Running,
    /// Answered without touching the store (bad input).
    answered: Option<Decided<Reply>>,
    /// Why it stopped, once it has.
    stop: Option<StoreError>,
}

/// How a call ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The answer, with the key's events and the store's time it was decided at.
    pub decided: Decided<Reply>,
    /// The owners this call's write handed the key to: the driver tells their waiters (as
    /// a store's `announce` does), best effort.
    pub handed_to: Vec<String>,
}

impl Outcome {
    /// The local instant at which a holder whose lease ends at `deadline` (store's time) must
    /// stop believing in it: the first at which the store's clock may have reached it, as the
    /// Rust `Lease` computes it. `now` if the call carried no clock (the caller's time).
    #[must_use]
    pub fn local_end(&self, deadline: Instant, now: LocalInstant) -> LocalInstant {
        match self.decided.clock {
            Some(clock) => local_end(Some(clock), deadline, now),
            None => now,
        }
    }

    /// For a release of a lease whose deadline is `deadline` (store's time): turns a refusal
    /// that means the release took effect into `Ok`, by the rule the Rust `Lease` follows (see
    /// "An ambiguous release" in docs/stores.md); `unsure` if an earlier attempt of the same
    /// lease failed with a store error. Answers whether it did.
    pub fn settle_release(&mut self, unsure: bool, deadline: Instant) -> bool {
        let decided = &mut self.decided;
        let Reply::Response(reply) = &mut decided.reply else {
            return false;
        };
        let done = crate::holding::release_took_effect(
            reply,
            unsure || decided.ambiguous,
            decided.now,
            deadline,
        );
        if done {
            *reply = Response::Release(Ok(lock_core::ReleaseOutcome::Released));
        }
        done
    }
}

/// The keys a query over a store inspects, in the order it inspects them: of the namespace's
/// `names`, those the page rule takes ([`QueryPage::matches`](lock_core::QueryPage::matches)),
/// in increasing byte order. The caller inspects them in turn until one more than a page is in
/// use, and cuts the page with [`QueryPage::from_ordered`](lock_core::QueryPage::from_ordered),
/// as `Locks::query` does. (The Node client does the same in JS, so that the npm engine carries
/// no sort of strings: `tests/js/store-vectors.test.js` runs the query vectors through it.)
#[must_use]
pub fn query_order(prefix: &str, after: &str, mut names: Vec<String>) -> Vec<String> {
    names.retain(|name| lock_core::QueryPage::matches(prefix, after, name));
    names.sort_unstable();
    names
}

/// A driver's view of one namespace: the limits, where time comes from, and the records it
/// last saw (one per key: an uncontended call starts from it and is one compare-and-set).
pub struct Client {
    store: String,
    decider: Native,
    limits: Limits,
    time: TimeSource,
    memory: Memory<KeyRecord>,
    random: u64,
}

impl Client {
    /// A client of the store described as `store` (what its errors name: the URL without its
    /// password, and the namespace), checking requests against `limits`, with time from `time`;
    /// `seed` seeds the versions it writes and its pauses (a random number per process).
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] if a limit is out of range.
    pub fn new(
        store: &str,
        limits: Limits,
        time: TimeSource,
        seed: u64,
    ) -> Result<Self, LockError> {
        limits.validate()?;
        Ok(Client {
            store: store.to_owned(),
            decider: Native,
            limits,
            time,
            memory: Memory::default(),
            random: seed,
        })
    }

    /// Test mode: every call starts from the record seen before the last one (see
    /// `lock-store`'s `Engine::set_stale`).
    pub fn set_stale(&mut self, stale: bool) {
        self.memory.stale = stale;
    }

    /// Forgets every record seen (after the namespace was cleared, say).
    pub fn forget_seen(&mut self) {
        self.memory.forget();
    }

    /// What the store's errors name.
    pub fn store(&self) -> &str {
        &self.store
    }

    /// The limits requests are checked against.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether `op` on `key` at `at` is valid input (an invalid one is answered without the
    /// store, and changes nothing).
    #[must_use]
    pub fn is_valid(&self, key: &str, op: &Op, at: Instant) -> bool {
        match op.request(key, at) {
            Some(request) => request.validate(&self.limits).is_ok(),
            None => self.limits.check_key(key).is_ok(),
        }
    }

    /// Starts `op` on `key` at local instant `t`; `at` is the caller's `now` with
    /// [`TimeSource::Caller`] (ignored with the store's time). Bad input is answered at once:
    /// the first [`Client::poll`] says [`Next::Done`] and nothing reaches the store.
    pub fn call(&mut self, key: &str, op: Op, at: Instant, t: LocalInstant) -> Call {
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let remembered = self.memory.start(key, t, &mut self.decider);
        let answered = self.refused(key, &op, at);
        let running = match op {
            Op::Inspect => Running::Inspect(Exchange::new(
                self.time,
                at,
                self.limits.clone(),
                remembered,
                self.random,
                Step::<InspectReply>::settle,
            )),
            _ => Running::Together(Exchange::new(
                self.time,
                at,
                self.limits.clone(),
                remembered,
                self.random,
                crate::decided::settle_each,
            )),
        };
        Call {
            key: key.to_owned(),
            op,
            rest: Vec::new(),
            running,
            answered,
            stop: None,
        }
    }

    /// Starts `ops` on `key`, decided together at local instant `t`: each on the record the
    /// one before it left, at the store's time, in one read (if the record is not remembered)
    /// and one compare-and-set for all, so that they all hold or none does. For the renewals
    /// of one key's waiters that are due at once ([`Wanted::Renew`]): each rewrites the record
    /// that holds every waiter, and a thousand waiters sent one by one would need 1 500 writes
    /// a second; the async Rust engine decides them so too. [`Client::finish_each`] answers
    /// each; a batch ends early after a request that allocates fresh fencing tokens (a
    /// renewal at an instant an expired lease is handed over): the ones it left unanswered are
    /// asked again. `None` for no operations or an [`Op::Inspect`] among them.
    pub fn call_together(&mut self, key: &str, ops: Vec<Op>, t: LocalInstant) -> Option<Call> {
        if ops.iter().any(|op| matches!(op, Op::Inspect)) {
            return None;
        }
        let mut ops = ops.into_iter();
        let op = ops.next()?;
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let remembered = self.memory.start(key, t, &mut self.decider);
        let running = Running::Together(Exchange::new(
            self.time,
            Instant::ZERO,
            self.limits.clone(),
            remembered,
            self.random,
            crate::decided::settle_each,
        ));
        Some(Call {
            key: key.to_owned(),
            op,
            rest: ops.collect(),
            running,
            answered: None,
            stop: None,
        })
    }

    /// The answer to bad input, given without the store (`None`: valid).
    fn refused(&mut self, key: &str, op: &Op, at: Instant) -> Option<Decided<Reply>> {
        let limits = &self.limits;
        if let Op::Inspect = op {
            return limits
                .check_key(key)
                .err()
                .map(|e| Decided::unchanged(Reply::Inspect(Err(e)), at));
        }
        let make = |now| {
            op.request(key, now)
                .unwrap_or(Request::HandleTimeout { now })
        };
        match refuse_invalid(&mut self.decider, limits, at, &make) {
            Ok(Some(refused)) => Some(Decided {
                reply: Reply::Response(refused.reply),
                events: refused.events,
                now: refused.now,
                next_deadline: refused.next_deadline,
                clock: refused.clock,
                ambiguous: refused.ambiguous,
            }),
            // The native core decides without failing; a failure would be the store's record's.
            Ok(None) | Err(_) => None,
        }
    }

    /// What `call` needs next, at local instant `t`.
    ///
    /// # Errors
    /// Why the call stopped (its record does not decode, the store answered another number of
    /// tokens, other writers won every attempt): finish it for the same error.
    pub fn poll<'c>(
        &mut self,
        call: &'c mut Call,
        t: LocalInstant,
    ) -> Result<Next<'c>, StoreError> {
        if call.answered.is_some() {
            return Ok(Next::Done);
        }
        if let Some(stop) = &call.stop {
            return Err(stop.clone());
        }
        let (key, op, rest, limits) = (call.key.as_str(), &call.op, &call.rest, &self.limits);
        let polled = match &mut call.running {
            Running::Inspect(exchange) => {
                exchange.poll(&mut self.decider, t, &mut |d, rec, now| {
                    d.inspect(rec, key, now, limits)
                })
            }
            Running::Together(exchange) => {
                exchange.poll(&mut self.decider, t, &mut |d, rec, now| {
                    let first = op
                        .request(key, now)
                        .unwrap_or(Request::HandleTimeout { now });
                    let mut others = rest.iter().filter_map(|op| op.request(key, now));
                    d.handle_each(rec, first, &mut others, limits)
                })
            }
        };
        match polled {
            Ok(Some(Io::Read)) => Ok(Next::Read),
            Ok(Some(Io::Write(write))) => Ok(Next::Write(write)),
            Ok(Some(Io::Pause(pause))) => Ok(Next::Pause(pause)),
            Ok(None) => Ok(Next::Done),
            Err(stop) => {
                let e = stopped(&self.store, key, stop);
                call.stop = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The answer to [`Next::Read`]: sent at local instant `sent`, answered at `arrived`.
    ///
    /// # Errors
    /// The read's failure (or the lost write's, when the read resolving it failed too), or a
    /// record that does not decode: the call is over; finish it for the same error.
    pub fn handle_read(
        &mut self,
        call: &mut Call,
        read: Result<Read, StoreError>,
        sent: LocalInstant,
        arrived: LocalInstant,
    ) -> Result<(), StoreError> {
        let handled = match &mut call.running {
            Running::Inspect(ex) => ex.handle_read(&mut self.decider, read, sent, arrived),
            Running::Together(ex) => ex.handle_read(&mut self.decider, read, sent, arrived),
        };
        self.stopped(call, handled)
    }

    /// The answer to [`Next::Write`], which arrived at local instant `arrived`.
    ///
    /// # Errors
    /// As [`Client::handle_read`]; [`StoreError::Lost`] is not one (the call reads next).
    pub fn handle_written(
        &mut self,
        call: &mut Call,
        written: Result<Written, StoreError>,
        arrived: LocalInstant,
    ) -> Result<(), StoreError> {
        let handled = match &mut call.running {
            Running::Inspect(ex) => ex.handle_written(&mut self.decider, written, arrived),
            Running::Together(ex) => ex.handle_written(&mut self.decider, written, arrived),
        };
        self.stopped(call, handled)
    }

    fn stopped(&mut self, call: &mut Call, handled: Result<(), Stop>) -> Result<(), StoreError> {
        handled.map_err(|stop| {
            let e = stopped(&self.store, &call.key, stop);
            call.stop = Some(e.clone());
            e
        })
    }

    /// The call's answer once [`Client::poll`] said [`Next::Done`]; the record it ended on is
    /// remembered for the key's next call.
    ///
    /// # Errors
    /// Why it stopped ([`StoreError::NoNamespace`]: install the namespace and call again).
    pub fn finish(&mut self, call: Call) -> Result<Outcome, StoreError> {
        let mut each = self.finish_each(call)?.into_iter();
        each.next().ok_or_else(|| StoreError::Server {
            store: self.store.clone(),
            reason: "a call decided nothing".into(),
        })
    }

    /// The answers of a call once [`Client::poll`] said [`Next::Done`], one per operation
    /// decided, in order: one for a [`Client::call`]; for a [`Client::call_together`], the
    /// first ones of its operations (those after them were not decided: ask them again), the
    /// owners it handed the key to in the first answer's `handed_to`.
    ///
    /// # Errors
    /// As [`Client::finish`].
    pub fn finish_each(&mut self, mut call: Call) -> Result<Vec<Outcome>, StoreError> {
        if let Some(answered) = call.answered.take() {
            return Ok(vec![Outcome {
                decided: answered,
                handed_to: Vec::new(),
            }]);
        }
        if let Some(stop) = call.stop.take() {
            return Err(stop);
        }
        let contention = || stopped(&self.store, &call.key, Stop::Contention);
        let (decided, handed_to) = match &mut call.running {
            Running::Inspect(ex) => {
                let finished = ex.finished().ok_or_else(contention)?;
                let handed: Vec<String> = finished.handed_to().map(str::to_owned).collect();
                self.memory.keep(&call.key, finished.remember);
                (finished.decided.map(Reply::Inspect), handed)
            }
            Running::Together(ex) => {
                let finished = ex.finished().ok_or_else(contention)?;
                let mut handed_to: Vec<String> = finished.handed_to().map(str::to_owned).collect();
                self.memory.keep(&call.key, finished.remember);
                let each = finished.decided.split().map(|decided| Outcome {
                    decided: decided.map(Reply::Response),
                    handed_to: std::mem::take(&mut handed_to),
                });
                return Ok(each.collect());
            }
        };
        Ok(vec![Outcome { decided, handed_to }])
    }
}

impl Call {
    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operation.
    pub fn op(&self) -> &Op {
        &self.op
    }
}

/// An `acquire` with a wait, sans IO: the waiting rules of the Rust `Locks` (queue with a short
/// wait deadline and renew it, look at the key's next deadline or when told of a hand-off, ride
/// out a store that fails while time remains, queue again after a lost place), for a driver
/// that runs each [`Wanted`] call through a [`Client`] and hands its end to
/// [`Waiting::answered`].
pub struct Waiting {
    acquiring: Acquiring,
    /// What the last [`Waiting::want`] asked, whose answer is due.
    asked: Option<Want>,
}

/// What a waiting caller does next.
#[derive(Debug)]
pub enum Wanted {
    /// Run this operation ([`Op::Ask`]: an acquire, or a try-acquire once no wait remains) and
    /// hand its end to [`Waiting::answered`].
    Ask(Op),
    /// Run this operation (a renewal of its place) and hand its end to [`Waiting::answered`].
    Renew(Op),
    /// Run [`Op::Inspect`] and hand its end to [`Waiting::answered`].
    Look,
    /// Wait this long, or until the notice of this caller's hand-off, then ask again.
    Nap(StdDuration),
    /// Wait this long (a store call failed), then ask again.
    Pause(StdDuration),
    /// Giving up: run this operation ([`Op::CancelWait`], or the [`Op::Release`] of a lease the
    /// key was handed meanwhile) and hand its end to [`Waiting::answered`].
    Leave(Op),
}

/// The lease a waiting caller won.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Won {
    /// Its fencing token.
    pub fence: Fence,
    /// Its deadline (store's time).
    pub deadline: Instant,
    /// When its holder stops believing in it, on the driver's clock (see
    /// [`Outcome::local_end`]).
    pub local_end: LocalInstant,
}

impl Waiting {
    /// An acquire of `key` for `owner` for `ttl`, waiting up to `wait`; `poll` is the longest
    /// nap without hand-off notices (and the pause after a failed call).
    #[must_use]
    pub fn new(
        key: &str,
        owner: &str,
        ttl: StdDuration,
        wait: StdDuration,
        poll: StdDuration,
    ) -> Self {
        Waiting::with_options(
            key,
            owner,
            ttl,
            wait,
            poll,
            &lock_core::AcquireOptions::EXCLUSIVE,
        )
    }

    /// [`Waiting::new`] with the lock kinds' options.
    #[must_use]
    pub fn with_options(
        key: &str,
        owner: &str,
        ttl: StdDuration,
        wait: StdDuration,
        poll: StdDuration,
        options: &lock_core::AcquireOptions<'_>,
    ) -> Self {
        let options = OwnedOptions::of(options);
        Waiting {
            acquiring: Acquiring::with_options(key, owner, ttl, wait, poll, options),
            asked: None,
        }
    }

    /// What to do next.
    pub fn want(&mut self) -> Wanted {
        let want = self.acquiring.want();
        let owner = || self.acquiring_owner();
        let wanted = match want {
            Want::Ask => Wanted::Ask(Op::Ask {
                owner: owner(),
                asking: self.acquiring.asking(),
            }),
            Want::Renew => Wanted::Renew(Op::Ask {
                owner: owner(),
                asking: self.acquiring.asking(),
            }),
            Want::Look => Wanted::Look,
            Want::Nap(nap) => Wanted::Nap(nap),
            Want::Pause(pause) => Wanted::Pause(pause),
            Want::Leave => Wanted::Leave(match self.acquiring.leave_fence() {
                Some(fence) => Op::Release {
                    owner: owner(),
                    fence,
                },
                None => Op::CancelWait { owner: owner() },
            }),
        };
        self.asked =
            matches!(want, Want::Ask | Want::Renew | Want::Look | Want::Leave).then_some(want);
        wanted
    }

    fn acquiring_owner(&self) -> String {
        self.acquiring.owner().to_owned()
    }

    /// The caller is queued (renewing its place, napping, looking).
    #[must_use]
    pub fn in_line(&self) -> bool {
        self.acquiring.in_line()
    }

    /// The caller gives up at local instant `t` (an aborted signal): `false` if nothing is left
    /// to do (it was not queued, and no call is in flight); `true` if the driver goes on with
    /// what [`Waiting::want`] asks ([`Wanted::Leave`], [`Wanted::Look`], [`Wanted::Pause`])
    /// until [`Waiting::answered`] ends the wait with [`Error::GaveUp`]: then nothing of this
    /// attempt is left on the key (its wait cancelled, a lease it was handed released). A lease
    /// won but not yet taken by the caller is released the same way.
    pub fn give_up(&mut self, t: LocalInstant) -> bool {
        self.acquiring.give_up(Error::GaveUp, t).is_ok()
    }

    /// The driver now hears (`true`) or no longer hears (`false`) this caller's hand-off
    /// notices (a hand-off before it listened was not heard: it looks once at once).
    pub fn watching(&mut self, watched: bool) {
        self.acquiring.watching(watched);
    }

    /// The fence of a lease this attempt was handed and released while giving up (that fence
    /// is spent), if any.
    #[must_use]
    pub fn released(&self) -> Option<Fence> {
        self.acquiring.released()
    }

    /// The end of the call the last [`Waiting::want`] asked for, at local instant `t`: the
    /// lease won, or `None` to go on.
    ///
    /// # Errors
    /// [`Error::WaitTimedOut`], [`Error::AlreadyWaiting`], [`Error::Lock`], [`Error::Store`]:
    /// the wait is over, and nothing of it is left on the key (an error while queued leaves the
    /// key first, through [`Wanted::Leave`]).
    pub fn answered(
        &mut self,
        ended: Result<Outcome, StoreError>,
        t: LocalInstant,
    ) -> Result<Option<Won>, Error> {
        let unexpected = |answer: &Response| {
            Error::Store(StoreError::Server {
                store: String::from("the store"),
                reason: format!("unexpected answer {answer:?}"),
            })
        };
        let won = match (self.asked.take(), ended) {
            (Some(Want::Ask), Err(e)) => self.acquiring.ask_failed(e)?,
            (Some(Want::Ask), Ok(outcome)) => match as_response(outcome.decided) {
                Ok(decided) => self.acquiring.asked(decided, unexpected, t)?,
                Err(e) => return Err(e),
            },
            (Some(Want::Renew), ended) => {
                let decided = match ended {
                    Ok(outcome) => Ok(as_response(outcome.decided)?),
                    Err(e) => Err(e),
                };
                self.acquiring.renewed(decided, unexpected, t)?
            }
            (Some(Want::Leave), ended) => {
                // An answer of the wrong kind counts as a failed call of the give-up.
                let decided = ended.and_then(|outcome| {
                    as_response(outcome.decided).map_err(|e| StoreError::Server {
                        store: String::from("the store"),
                        reason: e.to_string(),
                    })
                });
                self.acquiring.left(decided, t)?
            }
            (Some(Want::Look), ended) => {
                let decided = match ended {
                    Ok(outcome) => Ok(as_inspect(outcome.decided)?),
                    Err(e) => Err(e),
                };
                self.acquiring.looked(decided, t)?
            }
            _ => None,
        };
        Ok(won.map(|Granted { grant, clock }| Won {
            fence: grant.fence,
            deadline: grant.deadline,
            local_end: local_end(clock, grant.deadline, t),
        }))
    }
}

/// An answer of a request (not an inspection).
fn as_response(decided: Decided<Reply>) -> Result<Decided<Response>, Error> {
    match decided.reply {
        Reply::Response(_) => Ok(decided.map(|r| match r {
            Reply::Response(r) => r,
            _ => Response::Malformed,
        })),
        other => Err(unexpected_reply(&other)),
    }
}

/// An answer of an inspection.
fn as_inspect(decided: Decided<Reply>) -> Result<Decided<InspectReply>, Error> {
    match decided.reply {
        Reply::Inspect(_) => Ok(decided.map(|r| match r {
            Reply::Inspect(r) => r,
            _ => Ok(None),
        })),
        other => Err(unexpected_reply(&other)),
    }
}

fn unexpected_reply(reply: &Reply) -> Error {
    Error::Store(StoreError::Server {
        store: String::from("the store"),
        reason: format!("unexpected answer {reply:?}"),
    })
}
