//! Configurable limits and the validation of keys, owners and TTLs.

use crate::{Duration, LimitName, LockError};

/// Hard ceiling for [`Limits::max_key_bytes`] and [`Limits::max_owner_bytes`].
pub const MAX_NAME_BYTES: usize = 65_536;

/// The limits of one table. Every field has a documented default ([`Limits::default`]).
///
/// ```
/// let limits = lock_core::Limits { max_keys: 10, ..Default::default() };
/// assert!(limits.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Longest key, in UTF-8 bytes. Default 256; allowed `1..=65536`.
    pub max_key_bytes: usize,
    /// Longest owner, in UTF-8 bytes. Default 256; allowed `1..=65536`.
    pub max_owner_bytes: usize,
    /// Longest TTL of a lease, in ms. Default 86 400 000 (24 h); at least 1.
    pub max_ttl: Duration,
    /// Most live leases (held keys) at once. Default 1 000 000; at least 1.
    pub max_keys: usize,
    /// Longest wait queue of one key. Default 64; at least 1.
    pub max_waiters_per_key: usize,
    /// Most waiters in the whole table. Default 100 000; at least 1.
    pub max_waiters: usize,
    /// How long, in ms after its deadline, an expired lease is remembered so that its holder's
    /// `release`/`extend` answers [`LockError::Expired`] rather than [`LockError::NotHeld`].
    /// Default 600 000 (10 min); 0 remembers nothing.
    pub expired_retention: Duration,
    /// Most expired leases remembered at once (the oldest are forgotten first). Default 10 000;
    /// 0 remembers nothing.
    pub max_expired_records: usize,
    /// Most undrained events kept; past it the oldest is dropped and counted in
    /// [`Stats::events_dropped`](crate::Stats::events_dropped). Default 100 000; at least 1.
    pub max_pending_events: usize,
    /// Most leases of one key at once (shared leases, permits). Default 64; at least 1.
    pub max_holders_per_key: usize,
    /// Longest metadata of a lease, in UTF-8 bytes. Default 256; at most 65536 (0 allows none).
    pub max_metadata_bytes: usize,
    /// The table's lock-delay, in ms: after a lease expires or is stolen, its place stays taken
    /// this long (a request may ask for more, see
    /// [`AcquireOptions::lock_delay`](crate::AcquireOptions::lock_delay)). Default 0; at most
    /// `max_ttl`.
    pub lock_delay: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_bytes: 256,
            max_owner_bytes: 256,
            max_ttl: Duration::from_millis(86_400_000),
            max_keys: 1_000_000,
            max_waiters_per_key: 64,
            max_waiters: 100_000,
            expired_retention: Duration::from_millis(600_000),
            max_expired_records: 10_000,
            max_pending_events: 100_000,
            max_holders_per_key: 64,
            max_metadata_bytes: 256,
            lock_delay: Duration::ZERO,
        }
    }
}

impl Limits {
    /// Checks every field against its allowed range.
    ///
    /// # Errors
    /// [`LockError::InvalidLimits`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), LockError> {
        let bad = |limit| Err(LockError::InvalidLimits { limit });
        if !(1..=MAX_NAME_BYTES).contains(&self.max_key_bytes) {
            return bad(LimitName::MaxKeyBytes);
        }
        if !(1..=MAX_NAME_BYTES).contains(&self.max_owner_bytes) {
            return bad(LimitName::MaxOwnerBytes);
        }
        if self.max_ttl.is_zero() {
            return bad(LimitName::MaxTtl);
        }
        if self.max_keys == 0 || self.max_keys > u32::MAX as usize - 1 {
            return bad(LimitName::MaxKeys);
        }
        if self.max_waiters_per_key == 0 || self.max_waiters_per_key > u32::MAX as usize {
            return bad(LimitName::MaxWaitersPerKey);
        }
        if self.max_waiters == 0 {
            return bad(LimitName::MaxWaiters);
        }
        if self.max_pending_events == 0 {
            return bad(LimitName::MaxPendingEvents);
        }
        if self.max_holders_per_key == 0 || self.max_holders_per_key > u32::MAX as usize {
            return bad(LimitName::MaxHoldersPerKey);
        }
        if self.max_metadata_bytes > MAX_NAME_BYTES {
            return bad(LimitName::MaxMetadataBytes);
        }
        if self.lock_delay > self.max_ttl {
            return bad(LimitName::LockDelay);
        }
        Ok(())
    }

    /// Checks a key: non-empty, at most `max_key_bytes`, no control character.
    ///
    /// # Errors
    /// [`LockError::KeyEmpty`], [`LockError::KeyTooLong`] or [`LockError::KeyInvalid`].
    pub fn check_key(&self, key: &str) -> Result<(), LockError> {
        match check_name(key, self.max_key_bytes) {
            NameCheck::Ok => Ok(()),
            NameCheck::Empty => Err(LockError::KeyEmpty),
            NameCheck::TooLong => Err(LockError::KeyTooLong {
                len: key.len(),
                max: self.max_key_bytes,
            }),
            NameCheck::Invalid => Err(LockError::KeyInvalid),
        }
    }

    /// Checks a query's prefix, cursor and limit (see [`LockTable::query`](crate::LockTable::query)):
    /// the limit from 1 to [`QUERY_MAX`](crate::QUERY_MAX); a prefix or cursor is checked as a
    /// key would be, but may be empty.
    ///
    /// # Errors
    /// [`LockError::QueryLimit`], or a key error for the prefix or the cursor.
    pub fn check_query(&self, prefix: &str, after: &str, limit: usize) -> Result<(), LockError> {
        if !(1..=crate::QUERY_MAX).contains(&limit) {
            return Err(LockError::QueryLimit {
                max: crate::QUERY_MAX,
            });
        }
        for part in [prefix, after] {
            if !part.is_empty() {
                self.check_key(part)?;
            }
        }
        Ok(())
    }

    /// Checks an owner: non-empty, at most `max_owner_bytes`, no control character.
    ///
    /// # Errors
    /// [`LockError::OwnerEmpty`], [`LockError::OwnerTooLong`] or [`LockError::OwnerInvalid`].
    pub fn check_owner(&self, owner: &str) -> Result<(), LockError> {
        match check_name(owner, self.max_owner_bytes) {
            NameCheck::Ok => Ok(()),
            NameCheck::Empty => Err(LockError::OwnerEmpty),
            NameCheck::TooLong => Err(LockError::OwnerTooLong {
                len: owner.len(),
                max: self.max_owner_bytes,
            }),
            NameCheck::Invalid => Err(LockError::OwnerInvalid),
        }
    }

    /// Checks a lease's metadata: at most `max_metadata_bytes`, no control character (empty is
    /// fine: no metadata).
    ///
    /// # Errors
    /// [`LockError::MetadataTooLong`] or [`LockError::MetadataInvalid`].
    pub fn check_metadata(&self, metadata: &str) -> Result<(), LockError> {
        if metadata.is_empty() {
            return Ok(());
        }
        match check_name(metadata, self.max_metadata_bytes) {
            NameCheck::Ok | NameCheck::Empty => Ok(()),
            NameCheck::TooLong => Err(LockError::MetadataTooLong {
                len: metadata.len(),
                max: self.max_metadata_bytes,
            }),
            NameCheck::Invalid => Err(LockError::MetadataInvalid),
        }
    }

    /// Checks a TTL: `1..=max_ttl`.
    ///
    /// # Errors
    /// [`LockError::TtlZero`] or [`LockError::TtlTooLong`].
    pub fn check_ttl(&self, ttl: Duration) -> Result<(), LockError> {
        if ttl.is_zero() {
            Err(LockError::TtlZero)
        } else if ttl > self.max_ttl {
            Err(LockError::TtlTooLong {
                ttl,
                max: self.max_ttl,
            })
        } else {
            Ok(())
        }
    }
}

enum NameCheck {
    Ok,
    Empty,
    TooLong,
    Invalid,
}

fn check_name(name: &str, max: usize) -> NameCheck {
    if name.is_empty() {
        NameCheck::Empty
    } else if name.len() > max {
        NameCheck::TooLong
    } else if has_control(name) {
        NameCheck::Invalid
    } else {
        NameCheck::Ok
    }
}

/// Whether `name` holds a control character (Unicode category Cc: U+0000..U+001F and
/// U+007F..U+009F), checked on the UTF-8 bytes: the first range and U+007F are single bytes, the
/// rest is `C2 80`..`C2 9F`. Same answer as `name.chars().any(char::is_control)`, without
/// decoding every character (the check runs twice per request).
fn has_control(name: &str) -> bool {
    let bytes = name.as_bytes();
    // Fast path: is there any byte that could start a control character?
    let suspect = if cfg!(target_arch = "wasm32") {
        suspect_by_words(bytes)
    } else {
        suspect_by_bytes(bytes)
    };
    suspect
        && bytes.iter().enumerate().any(|(i, &b)| {
            b < 0x20 || b == 0x7f || (b == 0xc2 && matches!(bytes.get(i + 1), Some(0x80..=0x9f)))
        })
}

/// Whether a byte is below 0x20, 0x7F or 0xC2, one byte at a time and branch-free, so that native
/// targets vectorise it.
fn suspect_by_bytes(bytes: &[u8]) -> bool {
    bytes.iter().fold(false, |seen, &b| {
        seen | (b < 0x20) | (b == 0x7f) | (b == 0xc2)
    })
}

/// The same answer eight bytes at a time: wasm32 has no SIMD here, and its byte loop costs about
/// ten instructions per byte (component calls got 10 % faster).
fn suspect_by_words(bytes: &[u8]) -> bool {
    let mut words = bytes.chunks_exact(8);
    let suspect = (&mut words).fold(false, |seen, w| {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        seen | word_suspect(u64::from_le_bytes(word))
    });
    suspect | suspect_by_bytes(words.remainder())
}

/// Whether any of the eight bytes of `w` is below 0x20, 0x7F or 0xC2. Each test is the classic
/// exact "some byte is zero / less than n" bit trick (n <= 0x80): it may flag the wrong byte above
/// a true hit, but says "some byte" exactly.
fn word_suspect(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let below_0x20 = w.wrapping_sub(ONES * 0x20) & !w & HIGH != 0;
    below_0x20 | zero_byte(w ^ (ONES * 0x7f)) | zero_byte(w ^ (ONES * 0xc2))
}

#[cfg(test)]
mod tests {
    use super::{has_control, suspect_by_bytes, suspect_by_words, word_suspect};
    use proptest::prelude::*;

    #[test]
    fn the_byte_check_agrees_with_char_is_control() {
        // Every code point of the first planes between ASCII letters: inside the byte-wise tail,
        // across the end of the first 8-byte word, inside the second word.
        for prefix in ["a", "aaaaaaa", "aaaaaaaaaa"] {
            for c in (0u32..0x3_0000).filter_map(char::from_u32) {
                let mut s = alloc::string::String::from(prefix);
                s.push(c);
                s.push_str("bbbbbbbbbbbbbbb");
                assert_eq!(has_control(&s), c.is_control(), "{prefix:?} {c:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn the_word_test_is_exact(bytes in proptest::array::uniform8(any::<u8>())) {
            let expected = bytes.iter().any(|&b| b < 0x20 || b == 0x7f || b == 0xc2);
            prop_assert_eq!(word_suspect(u64::from_le_bytes(bytes)), expected);
        }

        #[test]
        fn both_fast_paths_agree(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(suspect_by_words(&bytes), suspect_by_bytes(&bytes));
        }

        #[test]
        fn long_names_agree_with_char_is_control(name in "\\PC{0,12}[\\x00-\\x{a0}]?\\PC{0,30}") {
            prop_assert_eq!(has_control(&name), name.chars().any(char::is_control));
        }
    }

    #[test]
    fn every_single_byte_value_in_every_word_position() {
        for at in 0..8 {
            for b in 0..=255u8 {
                let mut bytes = [b'a'; 8];
                bytes[at] = b;
                let expected = b < 0x20 || b == 0x7f || b == 0xc2;
                assert_eq!(
                    word_suspect(u64::from_le_bytes(bytes)),
                    expected,
                    "{b:#x} at {at}"
                );
            }
        }
    }
}
