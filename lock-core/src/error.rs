//! The one error type of the crate.

use core::fmt;

use crate::{Corruption, Duration, Instant, LimitName};

/// A [`LockError`]'s kind without its details: one of [`LockError::CODES`] by construction
/// (from [`LockError::error_code`] or [`ErrorCode::parse`]), for a face that has only the code
/// (the npm engine, the vectors) and for decisions that depend on the kind alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(u8);

impl ErrorCode {
    /// The code of this name, one of [`LockError::CODES`] (`None` for any other).
    ///
    /// ```
    /// use lock_core::ErrorCode;
    /// assert_eq!(ErrorCode::parse("not-owner").map(ErrorCode::name), Some("not-owner"));
    /// assert_eq!(ErrorCode::parse("not-an-error"), None);
    /// ```
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        LockError::CODES
            .iter()
            .position(|c| *c == name)
            .and_then(|i| u8::try_from(i).ok())
            .map(ErrorCode)
    }

    /// Its kebab-case name, [`LockError::code`]'s.
    #[must_use]
    pub const fn name(self) -> &'static str {
        LockError::CODES[self.0 as usize]
    }

    /// Whether it is a capacity limit (`table-full`, `queue-full`, `too-many-waiters`): the same
    /// request can succeed once others leave.
    #[must_use]
    pub const fn is_capacity(self) -> bool {
        matches!(self.0, 9..=11)
    }

    /// Whether a refusal of this kind, answering a holder's `extend` or `release`, means that
    /// the holder does not hold the lease any more (`expired`, `stolen`, `not-held`,
    /// `not-owner`): see [`LockError::lease_loss`]. Every face's lease asks this (the npm
    /// engine by the code alone).
    ///
    /// ```
    /// use lock_core::ErrorCode;
    /// let ends = |name| ErrorCode::parse(name).is_some_and(ErrorCode::is_lease_loss);
    /// assert!(ends("expired") && ends("stolen") && ends("not-held") && ends("not-owner"));
    /// assert!(!ends("ttl-too-long") && !ends("held"));
    /// ```
    #[must_use]
    pub fn is_lease_loss(self) -> bool {
        matches!(self.name(), "expired" | "stolen" | "not-held" | "not-owner")
    }
}

/// How a lease ended, as a refusal of its holder's call tells it ([`LockError::lease_loss`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseLoss {
    /// When (table or store time): the lease's deadline, or the instant it was stolen.
    pub at: Instant,
    /// It was stolen (another owner took the key by force), rather than expired.
    pub stolen: bool,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every way a request can fail.
///
/// Each variant maps 1:1 to an error case of the WIT contract and of the JS package; [`LockError::code`]
/// gives that shared kebab-case name. A call that returns an error changes no lease, waiter, fence
/// or clock (only the `rejected` counter of [`Stats`](crate::Stats) moves), except that time-driven
/// transitions up to `now` take effect first, as they would have anyway.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockError {
    /// The key is the empty string.
    KeyEmpty,
    /// The key is longer than [`Limits::max_key_bytes`](crate::Limits::max_key_bytes).
    KeyTooLong {
        /// Length of the rejected key, in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The key contains a control character (U+0000..U+001F, U+007F..U+009F).
    KeyInvalid,
    /// The owner is the empty string.
    OwnerEmpty,
    /// The owner is longer than [`Limits::max_owner_bytes`](crate::Limits::max_owner_bytes).
    OwnerTooLong {
        /// Length of the rejected owner, in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The owner contains a control character (U+0000..U+001F, U+007F..U+009F).
    OwnerInvalid,
    /// A TTL of zero was given; a lease must last at least 1 ms.
    TtlZero,
    /// The TTL is longer than [`Limits::max_ttl`](crate::Limits::max_ttl).
    TtlTooLong {
        /// The rejected TTL, in milliseconds.
        ttl: Duration,
        /// The limit.
        max: Duration,
    },
    /// `now + ttl` does not fit in a `u64` of milliseconds: the lease would end past the end of
    /// the clock.
    DeadlineOverflow {
        /// The (clamped) instant of the request.
        now: Instant,
        /// The rejected TTL.
        ttl: Duration,
    },
    /// The key is free but the table already holds [`Limits::max_keys`](crate::Limits::max_keys)
    /// live leases.
    TableFull {
        /// The limit.
        max_keys: usize,
    },
    /// The key's wait queue already holds
    /// [`Limits::max_waiters_per_key`](crate::Limits::max_waiters_per_key) waiters.
    QueueFull {
        /// The limit.
        max_waiters_per_key: usize,
    },
    /// The table already holds [`Limits::max_waiters`](crate::Limits::max_waiters) waiters in all.
    TooManyWaiters {
        /// The limit.
        max_waiters: usize,
    },
    /// Another owner holds a live lease on the key (and the caller did not, or could not, wait).
    Held {
        /// When the current lease ends unless it is extended: a retry-after hint.
        deadline: Instant,
    },
    /// Another owner holds the key: only the holder may release or extend it.
    NotOwner,
    /// This owner holds no lease on the key with that fencing token.
    NotHeld,
    /// The lease with that fencing token expired before this call: the holder lost the lock, and
    /// its critical section may have overlapped with the next holder's.
    Expired {
        /// The instant at which the lease expired.
        deadline: Instant,
    },
    /// The owner is not waiting on the key (never queued, already granted, timed out or cancelled).
    NotWaiting,
    /// A [`Limits`](crate::Limits) value is out of its allowed range.
    InvalidLimits {
        /// The offending field of [`Limits`](crate::Limits).
        limit: LimitName,
    },
    /// The snapshot ends before its declared length.
    SnapshotTruncated,
    /// The bytes do not start with the snapshot magic: not a snapshot of this crate.
    SnapshotBadMagic,
    /// The snapshot was written in a format version this build cannot read.
    SnapshotVersion {
        /// Version found in the snapshot.
        found: u16,
        /// Version this build reads and writes.
        supported: u16,
    },
    /// The snapshot's checksum does not match its contents.
    SnapshotChecksum,
    /// The snapshot is well-formed on the outside but its contents are inconsistent.
    SnapshotCorrupt {
        /// What is inconsistent.
        reason: Corruption,
    },
    /// The snapshot holds more than this table's limits allow.
    SnapshotExceedsLimits {
        /// The [`Limits`](crate::Limits) field that the snapshot exceeds.
        limit: LimitName,
    },
    /// The metadata is longer than
    /// [`Limits::max_metadata_bytes`](crate::Limits::max_metadata_bytes).
    MetadataTooLong {
        /// Length of the rejected metadata, in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The metadata contains a control character (U+0000..U+001F, U+007F..U+009F).
    MetadataInvalid,
    /// The request asks for more permits than
    /// [`Limits::max_holders_per_key`](crate::Limits::max_holders_per_key).
    TooManyPermits {
        /// The permits asked for.
        permits: u32,
        /// The limit.
        max: usize,
    },
    /// The key is in use with another number of permits (fixed at its first grant until it is
    /// free again).
    PermitsMismatch {
        /// The key's permits (0: a plain lock).
        permits: u32,
    },
    /// The owner already holds, or waits for, the key in the other mode (a lease never changes
    /// its mode: release it first).
    ModeMismatch,
    /// The minimum hold is longer than the TTL.
    MinHoldTooLong {
        /// The rejected minimum hold.
        min_hold: Duration,
        /// The request's TTL.
        ttl: Duration,
    },
    /// The lock-delay is longer than [`Limits::max_ttl`](crate::Limits::max_ttl).
    LockDelayTooLong {
        /// The rejected lock-delay.
        lock_delay: Duration,
        /// The limit.
        max: Duration,
    },
    /// The lease with that fencing token was stolen (another caller took the key regardless of
    /// its holders): the holder lost the lock at this instant.
    Stolen {
        /// The instant of the steal.
        at: Instant,
    },
    /// A query's limit is 0 or above the most one query answers.
    QueryLimit {
        /// The most keys one query answers ([`QUERY_MAX`](crate::QUERY_MAX)).
        max: usize,
    },
}

impl LockError {
    /// If this refusal of a holder's `extend` or `release` means that the holder lost the lease
    /// ([`ErrorCode::is_lease_loss`]), how it ended: stolen at the instant the refusal names, or
    /// expired at its deadline (`deadline`, the lease's deadline as the holder knew it, when the
    /// refusal does not name one: `not-held`, `not-owner`). `None` for any other refusal (bad
    /// input, capacity), which leaves the lease as it was.
    ///
    /// ```
    /// use lock_core::{Instant, LeaseLoss, LockError};
    /// let known = Instant(5_000);
    /// assert_eq!(LockError::Stolen { at: Instant(4_200) }.lease_loss(known),
    ///            Some(LeaseLoss { at: Instant(4_200), stolen: true }));
    /// assert_eq!(LockError::NotHeld.lease_loss(known), Some(LeaseLoss { at: known, stolen: false }));
    /// assert_eq!(LockError::TtlZero.lease_loss(known), None);
    /// ```
    #[must_use]
    pub const fn lease_loss(&self, deadline: Instant) -> Option<LeaseLoss> {
        let (at, stolen) = match self {
            LockError::Expired { deadline: at } => (*at, false),
            LockError::Stolen { at } => (*at, true),
            LockError::NotHeld | LockError::NotOwner => (deadline, false),
            _ => return None,
        };
        Some(LeaseLoss { at, stolen })
    }

    /// True for the errors of [`Request::validate`](crate::Request::validate): the request
    /// itself is bad (its key, owner or TTL), whatever state the key is in. A host that keeps
    /// records elsewhere refuses such a request without reading the record.
    #[must_use]
    pub const fn is_invalid_request(&self) -> bool {
        matches!(
            self,
            LockError::KeyEmpty
                | LockError::KeyTooLong { .. }
                | LockError::KeyInvalid
                | LockError::OwnerEmpty
                | LockError::OwnerTooLong { .. }
                | LockError::OwnerInvalid
                | LockError::TtlZero
                | LockError::TtlTooLong { .. }
                | LockError::MetadataTooLong { .. }
                | LockError::MetadataInvalid
                | LockError::TooManyPermits { .. }
                | LockError::MinHoldTooLong { .. }
                | LockError::LockDelayTooLong { .. }
                | LockError::QueryLimit { .. }
        )
    }

    /// The stable kebab-case name of this error, shared by the WIT contract, the JS package and the
    /// conformance vectors.
    ///
    /// ```
    /// assert_eq!(lock_core::LockError::NotOwner.code(), "not-owner");
    /// ```
    #[must_use]
    pub fn code(&self) -> &'static str {
        Self::CODES[self.index()]
    }

    /// This error's kind without its details, as a typed [`ErrorCode`].
    ///
    /// ```
    /// use lock_core::LockError;
    /// let code = LockError::QueueFull { max_waiters_per_key: 4 }.error_code();
    /// assert_eq!(code.name(), "queue-full");
    /// ```
    #[must_use]
    pub const fn error_code(&self) -> ErrorCode {
        // `CODES` has fewer than 256 entries (a test in this file checks it).
        #[allow(clippy::cast_possible_truncation)]
        ErrorCode(self.index() as u8)
    }

    /// Every error code, in declaration order: `CODES[e.index()] == e.code()`.
    pub const CODES: [&'static str; 33] = [
        "key-empty",
        "key-too-long",
        "key-invalid",
        "owner-empty",
        "owner-too-long",
        "owner-invalid",
        "ttl-zero",
        "ttl-too-long",
        "deadline-overflow",
        "table-full",
        "queue-full",
        "too-many-waiters",
        "held",
        "not-owner",
        "not-held",
        "expired",
        "not-waiting",
        "invalid-limits",
        "snapshot-truncated",
        "snapshot-bad-magic",
        "snapshot-version",
        "snapshot-checksum",
        "snapshot-corrupt",
        "snapshot-exceeds-limits",
        "metadata-too-long",
        "metadata-invalid",
        "too-many-permits",
        "permits-mismatch",
        "mode-mismatch",
        "min-hold-too-long",
        "lock-delay-too-long",
        "stolen",
        "query-limit",
    ];

    /// One error of every kind, in [`LockError::CODES`] order, each payload field a distinct
    /// value: for tests of an error mapping or codec in a binding, so that each does not list
    /// every variant again (the core's tests check that every variant is here, in order).
    #[must_use]
    pub fn examples() -> [LockError; LockError::CODES.len()] {
        [
            LockError::KeyEmpty,
            LockError::KeyTooLong { len: 300, max: 256 },
            LockError::KeyInvalid,
            LockError::OwnerEmpty,
            LockError::OwnerTooLong { len: 9, max: 8 },
            LockError::OwnerInvalid,
            LockError::TtlZero,
            LockError::TtlTooLong {
                ttl: Duration::MAX,
                max: Duration::from_millis(7),
            },
            LockError::DeadlineOverflow {
                now: Instant::from_millis(5),
                ttl: Duration::from_millis(6),
            },
            LockError::TableFull { max_keys: 3 },
            LockError::QueueFull {
                max_waiters_per_key: 4,
            },
            LockError::TooManyWaiters { max_waiters: 5 },
            LockError::Held {
                deadline: Instant::from_millis(6),
            },
            LockError::NotOwner,
            LockError::NotHeld,
            LockError::Expired {
                deadline: Instant::from_millis(7),
            },
            LockError::NotWaiting,
            LockError::InvalidLimits {
                limit: LimitName::MaxPendingEvents,
            },
            LockError::SnapshotTruncated,
            LockError::SnapshotBadMagic,
            LockError::SnapshotVersion {
                found: 2,
                supported: 1,
            },
            LockError::SnapshotChecksum,
            LockError::SnapshotCorrupt {
                reason: Corruption::NotUtf8,
            },
            LockError::SnapshotExceedsLimits {
                limit: LimitName::MaxKeys,
            },
            LockError::MetadataTooLong { len: 10, max: 9 },
            LockError::MetadataInvalid,
            LockError::TooManyPermits {
                permits: 65,
                max: 64,
            },
            LockError::PermitsMismatch { permits: 3 },
            LockError::ModeMismatch,
            LockError::MinHoldTooLong {
                min_hold: Duration::from_millis(11),
                ttl: Duration::from_millis(10),
            },
            LockError::LockDelayTooLong {
                lock_delay: Duration::from_millis(13),
                max: Duration::from_millis(12),
            },
            LockError::Stolen {
                at: Instant::from_millis(14),
            },
            LockError::QueryLimit { max: 1000 },
        ]
    }

    /// The position of this error's code in [`LockError::CODES`] (a compact tag for bindings
    /// that pass errors as numbers, like the npm package's engine).
    ///
    /// ```
    /// use lock_core::{Instant, LockError};
    /// let e = LockError::Held { deadline: Instant(5) };
    /// assert_eq!(LockError::CODES[e.index()], "held");
    /// ```
    #[must_use]
    pub const fn index(&self) -> usize {
        match self {
            LockError::KeyEmpty => 0,
            LockError::KeyTooLong { .. } => 1,
            LockError::KeyInvalid => 2,
            LockError::OwnerEmpty => 3,
            LockError::OwnerTooLong { .. } => 4,
            LockError::OwnerInvalid => 5,
            LockError::TtlZero => 6,
            LockError::TtlTooLong { .. } => 7,
            LockError::DeadlineOverflow { .. } => 8,
            LockError::TableFull { .. } => 9,
            LockError::QueueFull { .. } => 10,
            LockError::TooManyWaiters { .. } => 11,
            LockError::Held { .. } => 12,
            LockError::NotOwner => 13,
            LockError::NotHeld => 14,
            LockError::Expired { .. } => 15,
            LockError::NotWaiting => 16,
            LockError::InvalidLimits { .. } => 17,
            LockError::SnapshotTruncated => 18,
            LockError::SnapshotBadMagic => 19,
            LockError::SnapshotVersion { .. } => 20,
            LockError::SnapshotChecksum => 21,
            LockError::SnapshotCorrupt { .. } => 22,
            LockError::SnapshotExceedsLimits { .. } => 23,
            LockError::MetadataTooLong { .. } => 24,
            LockError::MetadataInvalid => 25,
            LockError::TooManyPermits { .. } => 26,
            LockError::PermitsMismatch { .. } => 27,
            LockError::ModeMismatch => 28,
            LockError::MinHoldTooLong { .. } => 29,
            LockError::LockDelayTooLong { .. } => 30,
            LockError::Stolen { .. } => 31,
            LockError::QueryLimit { .. } => 32,
        }
    }
}

/// The value of one field of an error's payload (see [`LockError::payload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadValue {
    /// A length, a limit, an instant or a duration.
    Number(u64),
    /// A field of [`Limits`](crate::Limits).
    Limit(LimitName),
    /// What is inconsistent in a snapshot.
    Corruption(Corruption),
}

impl LockError {
    /// The fields of this error's payload, in declaration order, with their snake_case names
    /// (the names the vectors use); at most two, `None` past the last. Bindings build their own
    /// shape of the payload from this instead of listing every error again.
    ///
    /// ```
    /// use lock_core::{LockError, PayloadValue};
    /// let e = LockError::KeyTooLong { len: 300, max: 256 };
    /// assert_eq!(
    ///     e.payload(),
    ///     [Some(("len", PayloadValue::Number(300))), Some(("max", PayloadValue::Number(256)))]
    /// );
    /// assert_eq!(LockError::NotOwner.payload(), [None, None]);
    /// ```
    #[must_use]
    pub fn payload(&self) -> [Option<(&'static str, PayloadValue)>; 2] {
        use PayloadValue::{Limit, Number};
        let n = |v: usize| Number(v as u64);
        let ms = |d: Duration| Number(d.as_millis());
        match *self {
            LockError::KeyTooLong { len, max }
            | LockError::OwnerTooLong { len, max }
            | LockError::MetadataTooLong { len, max } => {
                [Some(("len", n(len))), Some(("max", n(max)))]
            }
            LockError::TtlTooLong { ttl, max } => [Some(("ttl", ms(ttl))), Some(("max", ms(max)))],
            LockError::DeadlineOverflow { now, ttl } => [
                Some(("now", Number(now.as_millis()))),
                Some(("ttl", ms(ttl))),
            ],
            LockError::TableFull { max_keys } => [Some(("max_keys", n(max_keys))), None],
            LockError::QueueFull {
                max_waiters_per_key,
            } => [Some(("max_waiters_per_key", n(max_waiters_per_key))), None],
            LockError::TooManyWaiters { max_waiters } => {
                [Some(("max_waiters", n(max_waiters))), None]
            }
            LockError::Held { deadline } | LockError::Expired { deadline } => {
                [Some(("deadline", Number(deadline.as_millis()))), None]
            }
            LockError::InvalidLimits { limit } | LockError::SnapshotExceedsLimits { limit } => {
                [Some(("limit", Limit(limit))), None]
            }
            LockError::SnapshotVersion { found, supported } => [
                Some(("found", Number(u64::from(found)))),
                Some(("supported", Number(u64::from(supported)))),
            ],
            LockError::SnapshotCorrupt { reason } => {
                [Some(("reason", PayloadValue::Corruption(reason))), None]
            }
            LockError::TooManyPermits { permits, max } => [
                Some(("permits", Number(u64::from(permits)))),
                Some(("max", n(max))),
            ],
            LockError::PermitsMismatch { permits } => {
                [Some(("permits", Number(u64::from(permits)))), None]
            }
            LockError::MinHoldTooLong { min_hold, ttl } => {
                [Some(("min_hold", ms(min_hold))), Some(("ttl", ms(ttl)))]
            }
            LockError::LockDelayTooLong { lock_delay, max } => {
                [Some(("lock_delay", ms(lock_delay))), Some(("max", ms(max)))]
            }
            LockError::Stolen { at } => [Some(("at", Number(at.as_millis()))), None],
            LockError::QueryLimit { max } => [Some(("max", n(max))), None],
            LockError::KeyEmpty
            | LockError::KeyInvalid
            | LockError::OwnerEmpty
            | LockError::OwnerInvalid
            | LockError::TtlZero
            | LockError::NotOwner
            | LockError::NotHeld
            | LockError::NotWaiting
            | LockError::SnapshotTruncated
            | LockError::SnapshotBadMagic
            | LockError::SnapshotChecksum
            | LockError::MetadataInvalid
            | LockError::ModeMismatch => [None, None],
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::KeyEmpty => f.write_str("key is empty"),
            LockError::KeyTooLong { len, max } => {
                write!(f, "key is {len} bytes, longer than max_key_bytes ({max})")
            }
            LockError::KeyInvalid => f.write_str("key contains a control character"),
            LockError::OwnerEmpty => f.write_str("owner is empty"),
            LockError::OwnerTooLong { len, max } => {
                write!(
                    f,
                    "owner is {len} bytes, longer than max_owner_bytes ({max})"
                )
            }
            LockError::OwnerInvalid => f.write_str("owner contains a control character"),
            LockError::TtlZero => f.write_str("ttl is 0 ms; a lease must last at least 1 ms"),
            LockError::TtlTooLong { ttl, max } => {
                write!(f, "ttl of {ttl} ms is longer than max_ttl ({max} ms)")
            }
            LockError::DeadlineOverflow { now, ttl } => write!(
                f,
                "now ({now} ms) + ttl ({ttl} ms) is past the end of the clock ({} ms)",
                u64::MAX
            ),
            LockError::TableFull { max_keys } => {
                write!(f, "table already holds max_keys ({max_keys}) live leases")
            }
            LockError::QueueFull {
                max_waiters_per_key,
            } => write!(
                f,
                "wait queue of this key is full (max_waiters_per_key = {max_waiters_per_key})"
            ),
            LockError::TooManyWaiters { max_waiters } => {
                write!(f, "table already holds max_waiters ({max_waiters}) waiters")
            }
            LockError::Held { deadline } => {
                write!(f, "key is held by another owner until {deadline} ms")
            }
            LockError::NotOwner => f.write_str("key is held by another owner"),
            LockError::NotHeld => f.write_str("owner holds no lease on this key with this fence"),
            LockError::Expired { deadline } => write!(
                f,
                "lease expired at {deadline} ms; the lock was lost before this call"
            ),
            LockError::NotWaiting => f.write_str("owner is not waiting on this key"),
            LockError::InvalidLimits { limit } => write!(f, "limit {limit} is out of range"),
            LockError::SnapshotTruncated => f.write_str("snapshot is truncated"),
            LockError::SnapshotBadMagic => f.write_str("bytes are not a lock-table snapshot"),
            LockError::SnapshotVersion { found, supported } => write!(
                f,
                "snapshot format version {found} is not supported (this build reads {supported})"
            ),
            LockError::SnapshotChecksum => f.write_str("snapshot checksum mismatch"),
            LockError::SnapshotCorrupt { reason } => write!(f, "snapshot is corrupt: {reason}"),
            LockError::SnapshotExceedsLimits { limit } => {
                write!(f, "snapshot exceeds this table's {limit}")
            }
            LockError::MetadataTooLong { len, max } => write!(
                f,
                "metadata is {len} bytes, longer than max_metadata_bytes ({max})"
            ),
            LockError::MetadataInvalid => f.write_str("metadata contains a control character"),
            LockError::TooManyPermits { permits, max } => write!(
                f,
                "{permits} permits is more than max_holders_per_key ({max})"
            ),
            LockError::PermitsMismatch { permits } => write!(
                f,
                "the key is in use with {permits} permits (0: a plain lock); ask for the same"
            ),
            LockError::ModeMismatch => {
                f.write_str("owner already holds or waits for this key in the other mode")
            }
            LockError::MinHoldTooLong { min_hold, ttl } => write!(
                f,
                "min_hold of {min_hold} ms is longer than the ttl ({ttl} ms)"
            ),
            LockError::LockDelayTooLong { lock_delay, max } => write!(
                f,
                "lock_delay of {lock_delay} ms is longer than max_ttl ({max} ms)"
            ),
            LockError::Stolen { at } => write!(
                f,
                "lease was stolen at {at} ms; the lock was lost before this call"
            ),
            LockError::QueryLimit { max } => {
                write!(f, "a query's limit must be 1..={max}")
            }
        }
    }
}

impl core::error::Error for LockError {}

#[cfg(test)]
mod tests {
    use super::{ErrorCode, LockError};

    #[test]
    fn the_examples_are_every_variant_in_code_order() {
        for (i, e) in LockError::examples().iter().enumerate() {
            assert_eq!(e.index(), i, "{e:?}");
        }
    }

    #[test]
    fn error_codes_round_trip_and_name_the_capacity_limits() {
        assert!(LockError::CODES.len() < 256);
        let capacity: alloc::vec::Vec<&str> = LockError::examples()
            .iter()
            .map(LockError::error_code)
            .filter(|c| c.is_capacity())
            .map(ErrorCode::name)
            .collect();
        assert_eq!(capacity, ["table-full", "queue-full", "too-many-waiters"]);
        for e in LockError::examples() {
            let code = e.error_code();
            assert_eq!(code.name(), e.code());
            assert_eq!(ErrorCode::parse(e.code()), Some(code));
            assert_eq!(alloc::format!("{code}"), e.code());
        }
        assert_eq!(ErrorCode::parse(""), None);
        assert_eq!(ErrorCode::parse("Held"), None);
    }

    #[test]
    fn the_code_and_the_error_agree_on_which_refusals_end_a_lease() {
        let known = crate::Instant(7);
        for e in LockError::examples() {
            assert_eq!(
                e.error_code().is_lease_loss(),
                e.lease_loss(known).is_some(),
                "{e:?}"
            );
        }
    }

    #[test]
    fn codes_are_unique_kebab_case() {
        for (i, code) in LockError::CODES.iter().enumerate() {
            assert!(!LockError::CODES[..i].contains(code), "{code} twice");
            assert!(
                code.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{code}"
            );
        }
    }
}
