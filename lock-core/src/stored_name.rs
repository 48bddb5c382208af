//! Keys and owners as the table stores and compares them.
//!
//! [`Name`] keeps a name of up to [`INLINE`] bytes inside itself and only a longer one on the
//! heap: granting a lease then allocates nothing for the usual short key and owner (two heap
//! blocks per lease before, and on `wasm32` each allocation is a call into a slow allocator).
//!
//! [`same`] compares names eight bytes at a time: `==` on byte slices calls `memcmp`, which on
//! `wasm32` is a byte-at-a-time loop (there is no memory-compare instruction), and every lookup
//! compares a key and most requests an owner. Same answers as `==`, checked by property tests.

use alloc::boxed::Box;
use core::fmt;
use core::hash::{BuildHasher, Hash, Hasher};

use foldhash::fast::FixedState;

/// Longest name kept inline: with its length byte and the enum's tag, a [`Name`] is 24 bytes
/// on 64-bit targets (three words: a `Box<str>` and its tag would take that anyway) and 16 on
/// wasm32 (two `Box<str>`s), so a short key and owner cost a few bytes more inside the record
/// instead of two heap blocks. On 64-bit targets keys such as `nightly-report` and owners such
/// as `worker-7:4242` fit (22 bytes); on wasm32, 14 bytes; a UUID (36 bytes) goes to the heap.
/// (From 2026-11-30 to 2026-12-06 it was 30 bytes on 64-bit, by a formula meant for wasm32: 16
/// bytes more per lease, two names each, than the design and its measurements said.)
pub(crate) const INLINE: usize = if core::mem::size_of::<usize>() == 8 {
    22
} else {
    2 * core::mem::size_of::<Box<str>>() - 2
};

/// A key or owner: valid UTF-8 (it is only ever built from a `&str`), inline when short.
#[derive(Clone)]
pub(crate) enum Name {
    /// At most [`INLINE`] bytes, the first `len` of `bytes`.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// Longer names.
    Heap(Box<str>),
}

// Checked on every target, wasm32 included: 24 bytes on 64-bit, two `Box<str>`s on wasm32.
const _: () = assert!(core::mem::size_of::<Name>() == INLINE + 2);
const _: () = assert!(core::mem::size_of::<Name>() == 24 || core::mem::size_of::<usize>() != 8);

impl Name {
    /// Stores `name`.
    pub(crate) fn new(name: &str) -> Self {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                Name::Inline { len, bytes }
            }
            _ => Name::Heap(name.into()),
        }
    }

    /// Its bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(bytes),
            Name::Heap(name) => name.as_bytes(),
        }
    }

    /// Its text. For an inline name this re-checks UTF-8 (a few ns; never on a hot path: only
    /// events, inspection and snapshots read names back). It cannot fail, since a `Name` is built
    /// from a `&str`; without `unsafe` the check stays, and a failure would read as "".
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Name::Inline { .. } => core::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Name::Heap(name) => name,
        }
    }

    /// Whether this is `name`.
    pub(crate) fn is(&self, name: &str) -> bool {
        same_bytes(self.as_bytes(), name.as_bytes())
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        same_bytes(self.as_bytes(), other.as_bytes())
    }
}

impl Eq for Name {}

/// Hashes like its bytes, so a table can look a `Name` up by `name.as_bytes()`.
impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Whether `a` and `b` are the same string.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    same_bytes(a.as_bytes(), b.as_bytes())
}

/// Whether `a` and `b` are the same bytes, compared eight at a time.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut wa).zip(&mut wb) {
        if word(x) != word(y) {
            return false;
        }
    }
    // Fewer than 8 bytes left, the same number on both sides.
    let mut diff = 0;
    for (x, y) in wa.remainder().iter().zip(wb.remainder()) {
        diff |= x ^ y;
    }
    diff == 0
}

fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    u64::from_ne_bytes(w)
}

/// The index's hash of a key: its bytes alone. foldhash's `write` already mixes in the length,
/// so the length prefix that `Hash for [u8]` adds would only cost one more multiply (emulated
/// with four on wasm32).
pub(crate) fn hash_name(hasher: &FixedState, name: &[u8]) -> u64 {
    let mut state = hasher.build_hasher();
    state.write(name);
    state.finish()
}

#[cfg(test)]
mod tests {
    use super::{same, Name, INLINE};
    use alloc::string::String;
    use core::hash::BuildHasher;
    use proptest::prelude::*;

    #[test]
    fn short_names_are_inline_and_long_ones_on_the_heap() {
        let at_limit = "x".repeat(INLINE);
        assert!(matches!(Name::new(&at_limit), Name::Inline { .. }));
        assert!(matches!(
            Name::new(&alloc::format!("{at_limit}y")),
            Name::Heap(_)
        ));
        assert!(matches!(Name::new(""), Name::Inline { len: 0, .. }));
    }

    #[test]
    fn a_difference_anywhere_is_seen() {
        // Every length around the word size, with one byte changed at every position.
        for len in 0..40 {
            let a: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            assert!(same(&a, &a.clone()));
            for at in 0..len {
                let mut b = a.clone().into_bytes();
                b[at] = b'#';
                let b = String::from_utf8(b).unwrap();
                assert!(!same(&a, &b), "{a:?} vs {b:?}");
            }
            assert!(!same(&a, &alloc::format!("{a}x")));
        }
    }

    proptest! {
        #[test]
        fn agrees_with_eq(a in ".{0,40}", b in ".{0,40}") {
            prop_assert_eq!(same(&a, &b), a == b);
            prop_assert!(same(&a, &a.clone()));
        }

        #[test]
        fn a_name_behaves_as_its_string(a in ".{0,40}", b in ".{0,40}") {
            let (na, nb) = (Name::new(&a), Name::new(&b));
            prop_assert_eq!(na.as_str(), a.as_str());
            prop_assert_eq!(na.is(&b), a == b);
            prop_assert_eq!(na == nb, a == b);
            let hasher = foldhash::fast::FixedState::with_seed(7);
            prop_assert_eq!(hasher.hash_one(&na), hasher.hash_one(a.as_bytes()));
            prop_assert_eq!(alloc::format!("{na:?}"), alloc::format!("{a:?}"));
        }
    }
}
