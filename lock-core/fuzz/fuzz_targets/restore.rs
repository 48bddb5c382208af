//! `restore(bytes)` on arbitrary bytes must never panic and must leave the table untouched on
//! error. Half of the inputs are wrapped in a valid frame (magic, version, length, CRC-32) so the
//! fuzzer reaches the body decoder instead of stopping at the checksum. Whatever restores must
//! snapshot back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lock_core::{Duration, Instant, Limits, LockTable};

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 18);
    out.extend_from_slice(&lock_core::snapshot::MAGIC);
    out.extend_from_slice(&lock_core::snapshot::VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let bytes = if mode & 1 == 1 { framed(rest) } else { rest.to_vec() };
    let limits = Limits { max_keys: 64, max_waiters_per_key: 4, max_waiters: 64, ..Limits::default() };
    let mut table = LockTable::new(limits.clone()).unwrap();
    let _ = table.try_acquire("mine", "me", Duration(1000), Instant(5));
    let before = table.snapshot(Instant(5));
    match table.restore(&bytes) {
        Ok(()) => {
            let again = table.snapshot(table.clock());
            let mut copy = LockTable::from_snapshot(limits, 0, &again).unwrap();
            assert_eq!(copy.snapshot(table.clock()), again);
        }
        Err(_) => assert_eq!(table.snapshot(Instant(5)), before, "a failed restore changed the table"),
    }
});
