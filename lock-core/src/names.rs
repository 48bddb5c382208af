//! Closed sets of names carried by errors: which limit, and what is corrupt in a snapshot. Each
//! has a stable string form (the one the WIT contract, the JS package and the vectors carry), so
//! every runtime can map the string back to the same value.

use core::fmt;

macro_rules! named {
    ($(#[$doc:meta])* $ty:ident { $($(#[$vdoc:meta])* $variant:ident = $name:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($(#[$vdoc])* $variant,)*
        }

        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant,)*];

            /// The stable string form.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)*
                }
            }

            /// The value whose string form is `name`, if any.
            #[must_use]
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == name)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named! {
    /// A field of [`Limits`](crate::Limits), as named in errors.
    LimitName {
        /// `max_key_bytes`
        MaxKeyBytes = "max_key_bytes",
        /// `max_owner_bytes`
        MaxOwnerBytes = "max_owner_bytes",
        /// `max_ttl`
        MaxTtl = "max_ttl",
        /// `max_keys`
        MaxKeys = "max_keys",
        /// `max_waiters_per_key`
        MaxWaitersPerKey = "max_waiters_per_key",
        /// `max_waiters`
        MaxWaiters = "max_waiters",
        /// `max_pending_events`
        MaxPendingEvents = "max_pending_events",
        /// `max_holders_per_key`
        MaxHoldersPerKey = "max_holders_per_key",
        /// `max_metadata_bytes`
        MaxMetadataBytes = "max_metadata_bytes",
        /// `lock_delay`
        LockDelay = "lock_delay",
    }
}

named! {
    /// What is inconsistent in a snapshot whose frame and checksum are intact.
    Corruption {
        /// The body ends before its contents do.
        BodyEndsEarly = "body ends early",
        /// A count promises more items than the snapshot can hold.
        CountTooLarge = "count larger than the snapshot",
        /// A string is not UTF-8.
        NotUtf8 = "string is not UTF-8",
        /// A key is empty or holds a control character.
        InvalidKey = "invalid key",
        /// An owner is empty or holds a control character.
        InvalidOwner = "invalid owner",
        /// A TTL is zero.
        InvalidTtl = "invalid ttl",
        /// Bytes follow the checksum.
        BytesAfterEnd = "bytes after the end",
        /// The body is longer than its contents.
        BodyTooLong = "body longer than its contents",
        /// The fence counter is beyond 2^63.
        FenceCounterOutOfRange = "fence counter out of range",
        /// Keys are not in strictly increasing byte order.
        KeysOutOfOrder = "keys not in strictly increasing order",
        /// A lease's fence is 0 or above the counter.
        LeaseFenceNotIssued = "lease fence not issued by the counter",
        /// Two leases have the same fence.
        LeasesShareFence = "two leases share a fence",
        /// An expired lease's fence is 0, above the counter, or still live.
        ExpiredFenceInvalid = "expired lease fence not issued or still live",
        /// Expired leases are not in deadline order, or expired after the clock.
        ExpiredOutOfOrder = "expired leases out of order",
        /// Two expired leases have the same fence.
        ExpiredShareFence = "two expired leases share a fence",
        /// A key has waiters but no lease.
        WaitersWithoutLease = "waiters without a lease",
        /// A lease ended at or before the clock.
        LeaseAlreadyExpired = "lease already expired",
        /// A wait ended at or before the clock.
        WaitAlreadyTimedOut = "wait already timed out",
        /// A waiter asks for a zero TTL.
        WaiterZeroTtl = "waiter with zero ttl",
        /// The holder is also in the queue.
        HolderAlsoWaiting = "holder also waiting",
        /// An owner is in the queue twice.
        OwnerWaitingTwice = "owner waiting twice",
        /// A mode, a lease's end or a flag byte is not one of its values.
        UnknownTag = "unknown mode, end or flag",
        /// Metadata is too long or holds a control character.
        InvalidMetadata = "invalid metadata",
        /// Leases of one key conflict: an exclusive lease beside another, more than the key's
        /// permits, an owner holding twice, or leases out of fence order.
        HoldersConflict = "leases of one key conflict",
        /// Waiters wait although the first of them could be granted.
        GrantableWaiter = "a waiter could be granted",
        /// A minimum hold ends after its lease's deadline.
        MinHoldPastDeadline = "minimum hold past the deadline",
        /// A waiter's place is kept past the end of the wait it asked for.
        WaitKeptPastItsEnd = "a wait kept past its end",
        /// A lease was granted after the clock it was written at.
        GrantedAfterClock = "lease granted after the clock",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for v in LimitName::ALL {
            assert_eq!(LimitName::from_name(v.as_str()), Some(*v));
        }
        for v in Corruption::ALL {
            assert_eq!(Corruption::from_name(v.as_str()), Some(*v));
        }
        assert_eq!(LimitName::from_name("max_everything"), None);
    }
}
