//! Arbitrary bytes and names as a batch: `run_batch` never panics, answers one well-formed
//! response per request it decoded (plus `malformed` at most once, last), and re-encoding the
//! decoded requests gives back the bytes and the names they came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lock_core::wire::{decode_requests, decode_responses, encode_request, Response};
use lock_core::{Limits, LockTable};

fuzz_target!(|input: (&[u8], &str)| {
    let (bytes, names) = input;
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
    let malformed = responses.iter().filter(|r| **r == Response::Malformed).count();
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
