//! Arbitrary bytes and names as a batch: `run_batch` never panics, answers one well-formed
//! response per request it decoded (plus `malformed` at most once, last), and re-encoding the
//! decoded requests gives back the bytes and the names they came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lock_core::wire::{decode_requests, decode_responses, encode_request, Response};
use lock_core::{Limits, LockTable};

/// The input: the request bytes' length (u32 LE), the request bytes, then the names (UTF-8).
/// A plain layout, so the vectors can be written as seeds (`examples/fuzz_seeds.rs` of
/// lock-conformance).
fn split(data: &[u8]) -> Option<(&[u8], &str)> {
    let (len, rest) = data.split_first_chunk::<4>()?;
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (bytes, names) = rest.split_at(len);
    Some((bytes, std::str::from_utf8(names).ok()?))
}

fuzz_target!(|data: &[u8]| {
    let Some((bytes, names)) = split(data) else {
        return;
    };
    let mut table = LockTable::new(Limits {
        max_keys: 64,
        ..Limits::default()
    })
    .unwrap();
    let mut out = Vec::new();
    let ran = table.run_batch(bytes, names, &mut out);
    let responses = decode_responses(&out).expect("the table's responses decode");
    let decoded: Vec<_> = decode_requests(bytes, names).collect();
    assert_eq!(responses.len(), decoded.len());
    let malformed = responses
        .iter()
        .filter(|r| **r == Response::Malformed)
        .count();
    assert!(malformed <= 1);
    if malformed == 1 {
        assert_eq!(responses.last(), Some(&Response::Malformed));
    }
    assert_eq!(ran + malformed, responses.len());
    let (mut again, mut again_names) = (Vec::new(), String::new());
    for request in decoded.iter().flatten() {
        encode_request(&mut again, &mut again_names, request);
    }
    assert_eq!(again, bytes[..again.len()]);
    assert_eq!(again_names, names[..again_names.len()]);
});
