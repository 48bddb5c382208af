#!/usr/bin/env python3
"""Writes lock-table snapshots (format versions 1 and 3, see lock-core/src/snapshot.rs and
lock-core/src/key_codec.rs) from a plain description, independently of the Rust encoder. Used to
produce the exact and the deliberately corrupt snapshots in tests/vectors/snapshot.json, so the
vectors check the encoder against the documented format rather than against itself. Version 3 is
what every build writes now; version 1 (written before grant instants were kept) is still read.

    python3 tests/tools/snapshot_hex.py    # prints the named snapshots as hex
"""
import struct
import zlib


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def s(text):
    b = text.encode("utf-8")
    return u32(len(b)) + b


def body(clock, last_fence, counters, keys, expired):
    out = u64(clock) + u64(last_fence) + b"".join(u64(c) for c in counters)
    out += u32(len(keys))
    for key, owner, fence, deadline, waiters in keys:
        out += s(key) + s(owner) + u64(fence) + u64(deadline) + u32(len(waiters))
        for w_owner, ttl, wait_deadline in waiters:
            out += s(w_owner) + u64(ttl) + u64(wait_deadline)
    out += u32(len(expired))
    for fence, key, owner, deadline in expired:
        out += u64(fence) + s(key) + s(owner) + u64(deadline)
    return out


def body_v3(clock, last_fence, counters, keys, expired):
    """Version 3: 11 counters (stolen last), each key's permits and leases with their terms and
    grant instant, waiters with their options, a stolen flag per remembered lease. Every lease
    here is exclusive and plain, granted at `granted`; every waiter plain."""
    out = u64(clock) + u64(last_fence) + b"".join(u64(c) for c in counters)
    out += u32(len(keys))
    for key, owner, fence, deadline, granted, waiters in keys:
        out += s(key) + u32(0) + u32(1)  # no permits, one lease
        out += s(owner) + u64(fence) + u64(deadline)
        out += b"\x00" + b"\x00" + s("") + b"\x00" + u64(0)  # exclusive, live, no metadata, min hold, lock-delay
        out += b"\x01" + u64(granted)
        out += u32(len(waiters))
        for w_owner, ttl, wait_deadline in waiters:
            out += s(w_owner) + u64(ttl) + u64(wait_deadline)
            out += b"\x00" + s("") + u64(0) + u64(0) + u64(0)  # exclusive, no metadata, min hold, lock-delay, wait_alive
    out += u32(len(expired))
    for fence, key, owner, deadline in expired:
        out += u64(fence) + s(key) + s(owner) + u64(deadline) + b"\x00"
    return out


def frame(b, version=1, magic=b"LOCKSNAP"):
    head = magic + struct.pack("<H", version) + u32(len(b)) + b
    return head + u32(zlib.crc32(head))


# acquired handed_off released extended expired queued wait_timed_out cancelled rejected events_dropped
COUNTERS = [2, 0, 0, 0, 1, 1, 0, 0, 0, 0]
KEYS = [("k", "a", 1, 100, [("b", 50, 1000)])]
EXPIRED = [(2, "e", "c", 10)]

KEYS_V3 = [("k", "a", 1, 100, 0, [("b", 50, 1000)])]

SNAPSHOTS = {
    "exact-v3": frame(body_v3(20, 2, COUNTERS + [0], KEYS_V3, EXPIRED), version=3),
    "exact": frame(body(20, 2, COUNTERS, KEYS, EXPIRED)),
    "version-4": frame(body(20, 2, COUNTERS, KEYS, EXPIRED), version=4),
    "lease-already-expired": frame(body(200, 2, COUNTERS, KEYS, [])),
    "keys-out-of-order": frame(body(0, 2, [0] * 10, [("b", "x", 1, 10, []), ("a", "x", 2, 10, [])], [])),
    "fence-not-issued": frame(body(0, 1, [0] * 10, [("a", "x", 5, 10, [])], [])),
    "holder-also-waiting": frame(body(0, 1, [0] * 10, [("a", "x", 1, 10, [("x", 5, 50)])], [])),
    "two-keys": frame(body(0, 2, [0] * 10, [("a", "x", 1, 10, []), ("b", "x", 2, 10, [])], [])),
    "long-key": frame(body(0, 1, [0] * 10, [("a-rather-long-key", "x", 1, 10, [])], [])),
    "empty-table-at-1000": frame(body(1000, 7, [0] * 10, [], [])),
}

if __name__ == "__main__":
    for name, data in SNAPSHOTS.items():
        print(f"{name}: {data.hex()}")
