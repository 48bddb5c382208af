//! Equality of keys and owners, eight bytes at a time.
//!
//! `==` on byte slices calls `memcmp`; on `wasm32` that is a byte-at-a-time loop (there is no
//! memory-compare instruction), and every lookup compares a key and most requests an owner. Names
//! are short, so comparing them in 8-byte words is what makes the component's lookups as cheap as
//! the native ones. Same answer as `a == b`, checked by a property test.

/// Whether `a` and `b` are the same string.
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
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

#[cfg(test)]
mod tests {
    use super::same;
    use alloc::string::String;
    use proptest::prelude::*;

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
    }
}
