//! A compact byte encoding of a batch of requests and of their responses, so that a whole batch
//! crosses a boundary (the WebAssembly component's `batch`) as a few flat values instead of a list
//! of typed records: lifting and lowering them is a copy.
//!
//! A batch is two values: **`requests`**, bytes with every request's fixed-size fields, and
//! **`names`**, one string with every key and owner of the requests, concatenated in request order
//! (each request's key, then its owner). Keeping the text apart means it is checked as UTF-8 once
//! for the whole batch (a WIT `string` is valid by construction) instead of once per name, and
//! each request only says how long its names are. All integers are little-endian.
//!
//! A request is an operation byte, `now` (`u64`), then its fields; a name field is its byte length
//! as a `u32`, and the name itself is the next that many bytes of `names`:
//!
//! | op | operation | fields after `now` |
//! | --- | --- | --- |
//! | 0 | try-acquire | key, owner, ttl |
//! | 1 | acquire | key, owner, ttl, wait_deadline |
//! | 2 | release | key, owner, fence |
//! | 3 | extend | key, owner, fence, ttl |
//! | 4 | cancel-wait | key, owner |
//! | 5 | handle-timeout | (none) |
//! | 6 | renew-wait | key, owner, wait deadline `u64` |
//! | 7 | acquire-with | key, owner, ttl, wait_deadline, options |
//! | 8 | steal | key, owner, ttl, options |
//!
//! `options` are: mode `u8` (0 exclusive, 1 shared), permits `u32`, min_hold `u64`,
//! lock_delay `u64`, the metadata as a third name (its length here, its text in `names`
//! after the request's owner), wait_alive `u64`.
//!
//! A response is a tag byte, then:
//!
//! | tag | meaning | fields |
//! | --- | --- | --- |
//! | 0 | acquire (or renew-wait) answered | outcome (`u8`: 0 acquired, 1 already-held, 2 queued, 3 already-waiting), `a: u64`, `b: u64` (fence and deadline, or position and 0) |
//! | 1 | cancel-wait done | (none) |
//! | 2 | extend answered | fence `u64`, deadline `u64` |
//! | 3 | handle-timeout done | (none) |
//! | 4, 5, 6 | error of an acquire (or renew-wait), a cancel-wait, an extend | error (`u8`, its [`LockError::index`]), `a: u64`, `b: u64` (the error's fields in declaration order, names as their index in [`LimitName::ALL`] / [`Corruption::ALL`], 0 when absent) |
//! | 7 | malformed request: it and the rest of the batch were not run | (none) |
//! | 8 | release answered | outcome (`u8`: 0 released, 1 held-until), until `u64` (0 when released) |
//! | 9 | error of a release | as 4 |
//!
//! A request is malformed if its bytes are cut short, its operation is unknown, or a name runs
//! past the end of `names` or ends inside a character. Text left in `names` after the last request
//! is ignored.
//!
//! ```
//! use lock_core::wire::{self, Request, Response};
//! use lock_core::{AcquireOutcome, Duration, Fence, Grant, Instant, LockTable, ReleaseOutcome};
//!
//! let (mut requests, mut names) = (Vec::new(), String::new());
//! wire::encode_request(&mut requests, &mut names, &Request::TryAcquire { key: "job", owner: "a", ttl: Duration(100), now: Instant(0) });
//! wire::encode_request(&mut requests, &mut names, &Request::Release { key: "job", owner: "a", fence: Fence(1), now: Instant(5) });
//! assert_eq!(names, "jobajoba");
//! let mut table = LockTable::default();
//! let mut responses = Vec::new();
//! table.run_batch(&requests, &names, &mut responses);
//! assert_eq!(
//!     wire::decode_responses(&responses).unwrap(),
//!     [
//!         Response::Acquire(Ok(AcquireOutcome::Acquired(Grant { fence: Fence(1), deadline: Instant(100) }))),
//!         Response::Release(Ok(ReleaseOutcome::Released)),
//!     ]
//! );
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub use crate::call::{Request, Response};
use crate::{
    AcquireOptions, AcquireOutcome, Corruption, Duration, Fence, Grant, Instant, LimitName,
    LockError, Mode, PayloadValue, ReleaseOutcome,
};

/// Bytes that are not a well-formed list of responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireError {
    /// Byte offset where decoding failed.
    pub offset: usize,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed batch response at byte {}", self.offset)
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a name: its length to the request, its text to the names.
fn put_name(out: &mut Vec<u8>, names: &mut String, name: &str) {
    // Keys and owners are at most MAX_NAME_BYTES; a longer name saturates its length and then
    // fails to decode (malformed) rather than being cut.
    let len = u32::try_from(name.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    names.push_str(name);
}

/// Appends `request` to a batch: its fields to `out`, its key and owner to `names`.
pub fn encode_request(out: &mut Vec<u8>, names: &mut String, request: &Request<'_>) {
    let (op, now) = match *request {
        Request::TryAcquire { now, .. } => (0, now),
        Request::Acquire { now, .. } => (1, now),
        Request::Release { now, .. } => (2, now),
        Request::Extend { now, .. } => (3, now),
        Request::CancelWait { now, .. } => (4, now),
        Request::HandleTimeout { now } => (5, now),
        Request::RenewWait { now, .. } => (6, now),
        Request::AcquireWith { now, .. } => (7, now),
        Request::Steal { now, .. } => (8, now),
    };
    out.push(op);
    put_u64(out, now.as_millis());
    let (key, owner) = match *request {
        Request::TryAcquire { key, owner, .. }
        | Request::Acquire { key, owner, .. }
        | Request::Release { key, owner, .. }
        | Request::Extend { key, owner, .. }
        | Request::CancelWait { key, owner, .. }
        | Request::RenewWait { key, owner, .. }
        | Request::AcquireWith { key, owner, .. }
        | Request::Steal { key, owner, .. } => (key, owner),
        Request::HandleTimeout { .. } => return,
    };
    put_name(out, names, key);
    put_name(out, names, owner);
    match *request {
        Request::TryAcquire { ttl, .. } => put_u64(out, ttl.as_millis()),
        Request::Acquire {
            ttl, wait_deadline, ..
        } => {
            put_u64(out, ttl.as_millis());
            put_u64(out, wait_deadline.as_millis());
        }
        Request::Release { fence, .. } => put_u64(out, fence.get()),
        Request::Extend { fence, ttl, .. } => {
            put_u64(out, fence.get());
            put_u64(out, ttl.as_millis());
        }
        Request::RenewWait { wait_deadline, .. } => put_u64(out, wait_deadline.as_millis()),
        Request::AcquireWith {
            ttl,
            wait_deadline,
            options,
            ..
        } => {
            put_u64(out, ttl.as_millis());
            put_u64(out, wait_deadline.as_millis());
            put_options(out, names, &options);
        }
        Request::Steal { ttl, options, .. } => {
            put_u64(out, ttl.as_millis());
            put_options(out, names, &options);
        }
        Request::CancelWait { .. } | Request::HandleTimeout { .. } => {}
    }
}

/// Appends an acquire's options (the metadata as a name).
fn put_options(out: &mut Vec<u8>, names: &mut String, options: &AcquireOptions<'_>) {
    out.push(match options.mode {
        Mode::Exclusive => 0,
        Mode::Shared => 1,
    });
    out.extend_from_slice(&options.permits.to_le_bytes());
    put_u64(out, options.min_hold.as_millis());
    put_u64(out, options.lock_delay.as_millis());
    put_name(out, names, options.metadata);
    put_u64(out, options.wait_alive.as_millis());
}

/// Reads an acquire's options written by [`put_options`].
fn options<'a>(r: &mut Reader<'_>, names: &mut Names<'a>) -> Option<AcquireOptions<'a>> {
    let mode = match r.u8()? {
        0 => Mode::Exclusive,
        1 => Mode::Shared,
        _ => return None,
    };
    Some(AcquireOptions {
        mode,
        permits: r.u32()?,
        min_hold: Duration::from_millis(r.u64()?),
        lock_delay: Duration::from_millis(r.u64()?),
        metadata: names.next(r)?,
        wait_alive: Duration::from_millis(r.u64()?),
    })
}

/// A reader over bytes that fails (`None`) instead of panicking.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0xff; 4])))
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }
}

/// The names of a batch, taken in order.
struct Names<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Names<'a> {
    /// The next name, whose byte length `r` holds next.
    fn next(&mut self, r: &mut Reader<'_>) -> Option<&'a str> {
        let end = self.at.checked_add(usize::try_from(r.u32()?).ok()?)?;
        // `get` refuses a range past the end or not on character boundaries.
        let name = self.text.get(self.at..end)?;
        self.at = end;
        Some(name)
    }
}

/// The requests of the batch (`bytes`, `names`), in order; a malformed one ends the sequence with
/// `Err(offset in bytes)`.
pub fn decode_requests<'a>(
    bytes: &'a [u8],
    names: &'a str,
) -> impl Iterator<Item = Result<Request<'a>, usize>> + 'a {
    let mut r = Reader::new(bytes);
    let mut names = Names { text: names, at: 0 };
    let mut failed = false;
    core::iter::from_fn(move || {
        if failed || r.done() {
            return None;
        }
        let start = r.at;
        let request = decode_one(&mut r, &mut names);
        failed = request.is_none();
        Some(request.ok_or(start))
    })
}

fn decode_one<'a>(r: &mut Reader<'_>, names: &mut Names<'a>) -> Option<Request<'a>> {
    let op = r.u8()?;
    let now = Instant::from_millis(r.u64()?);
    match op {
        0..=4 | 6..=8 => {}
        5 => return Some(Request::HandleTimeout { now }),
        _ => return None,
    }
    let (key, owner) = (names.next(r)?, names.next(r)?);
    Some(match op {
        0 => Request::TryAcquire {
            key,
            owner,
            ttl: Duration::from_millis(r.u64()?),
            now,
        },
        1 => Request::Acquire {
            key,
            owner,
            ttl: Duration::from_millis(r.u64()?),
            wait_deadline: Instant::from_millis(r.u64()?),
            now,
        },
        2 => Request::Release {
            key,
            owner,
            fence: Fence::new(r.u64()?),
            now,
        },
        3 => Request::Extend {
            key,
            owner,
            fence: Fence::new(r.u64()?),
            ttl: Duration::from_millis(r.u64()?),
            now,
        },
        4 => Request::CancelWait { key, owner, now },
        6 => Request::RenewWait {
            key,
            owner,
            wait_deadline: Instant::from_millis(r.u64()?),
            now,
        },
        7 => Request::AcquireWith {
            key,
            owner,
            ttl: Duration::from_millis(r.u64()?),
            wait_deadline: Instant::from_millis(r.u64()?),
            options: options(r, names)?,
            now,
        },
        8 => Request::Steal {
            key,
            owner,
            ttl: Duration::from_millis(r.u64()?),
            options: options(r, names)?,
            now,
        },
        _ => return None,
    })
}

/// An error as (its index, its two payload fields as numbers; names as their index).
fn error_parts(e: &LockError) -> (u8, u64, u64) {
    let [a, b] = e.payload().map(|field| match field {
        None => 0,
        Some((_, PayloadValue::Number(n))) => n,
        Some((_, PayloadValue::Limit(l))) => name_index(LimitName::ALL, l),
        Some((_, PayloadValue::Corruption(c))) => name_index(Corruption::ALL, c),
    });
    // There are fewer than 256 errors (`LockError::CODES` has 33).
    (e.index() as u8, a, b)
}

fn name_index<T: PartialEq>(all: &[T], v: T) -> u64 {
    all.iter().position(|x| *x == v).unwrap_or(0) as u64
}

/// The error with this index and fields, if they make one.
fn error_from_parts(index: u8, a: u64, b: u64) -> Option<LockError> {
    let size = |v: u64| usize::try_from(v).ok();
    let limit = |v: u64| LimitName::ALL.get(size(v)?).copied();
    Some(match *LockError::CODES.get(usize::from(index))? {
        "key-empty" => LockError::KeyEmpty,
        "key-too-long" => LockError::KeyTooLong {
            len: size(a)?,
            max: size(b)?,
        },
        "key-invalid" => LockError::KeyInvalid,
        "owner-empty" => LockError::OwnerEmpty,
        "owner-too-long" => LockError::OwnerTooLong {
            len: size(a)?,
            max: size(b)?,
        },
        "owner-invalid" => LockError::OwnerInvalid,
        "ttl-zero" => LockError::TtlZero,
        "ttl-too-long" => LockError::TtlTooLong {
            ttl: Duration::from_millis(a),
            max: Duration::from_millis(b),
        },
        "deadline-overflow" => LockError::DeadlineOverflow {
            now: Instant::from_millis(a),
            ttl: Duration::from_millis(b),
        },
        "table-full" => LockError::TableFull { max_keys: size(a)? },
        "queue-full" => LockError::QueueFull {
            max_waiters_per_key: size(a)?,
        },
        "too-many-waiters" => LockError::TooManyWaiters {
            max_waiters: size(a)?,
        },
        "held" => LockError::Held {
            deadline: Instant::from_millis(a),
        },
        "not-owner" => LockError::NotOwner,
        "not-held" => LockError::NotHeld,
        "expired" => LockError::Expired {
            deadline: Instant::from_millis(a),
        },
        "not-waiting" => LockError::NotWaiting,
        "invalid-limits" => LockError::InvalidLimits { limit: limit(a)? },
        "snapshot-truncated" => LockError::SnapshotTruncated,
        "snapshot-bad-magic" => LockError::SnapshotBadMagic,
        "snapshot-version" => LockError::SnapshotVersion {
            found: u16::try_from(a).ok()?,
            supported: u16::try_from(b).ok()?,
        },
        "snapshot-checksum" => LockError::SnapshotChecksum,
        "snapshot-corrupt" => LockError::SnapshotCorrupt {
            reason: Corruption::ALL.get(size(a)?).copied()?,
        },
        "snapshot-exceeds-limits" => LockError::SnapshotExceedsLimits { limit: limit(a)? },
        "metadata-too-long" => LockError::MetadataTooLong {
            len: size(a)?,
            max: size(b)?,
        },
        "metadata-invalid" => LockError::MetadataInvalid,
        "too-many-permits" => LockError::TooManyPermits {
            permits: u32::try_from(a).ok()?,
            max: size(b)?,
        },
        "permits-mismatch" => LockError::PermitsMismatch {
            permits: u32::try_from(a).ok()?,
        },
        "mode-mismatch" => LockError::ModeMismatch,
        "min-hold-too-long" => LockError::MinHoldTooLong {
            min_hold: Duration::from_millis(a),
            ttl: Duration::from_millis(b),
        },
        "lock-delay-too-long" => LockError::LockDelayTooLong {
            lock_delay: Duration::from_millis(a),
            max: Duration::from_millis(b),
        },
        "stolen" => LockError::Stolen {
            at: Instant::from_millis(a),
        },
        "query-limit" => LockError::QueryLimit { max: size(a)? },
        _ => return None,
    })
}

/// Appends `response` to `out`.
pub fn encode_response(out: &mut Vec<u8>, response: &Response) {
    let error = |out: &mut Vec<u8>, tag: u8, e: &LockError| {
        let (index, a, b) = error_parts(e);
        out.push(tag);
        out.push(index);
        put_u64(out, a);
        put_u64(out, b);
    };
    match response {
        Response::Acquire(Ok(o)) => {
            let (a, b) = o.numbers();
            out.push(0);
            // Fewer than 256 outcomes (`AcquireOutcome::NAMES` has 4).
            out.push(o.index() as u8);
            put_u64(out, a);
            put_u64(out, b);
        }
        Response::Done(Ok(())) => out.push(1),
        Response::Extend(Ok(g)) => {
            out.push(2);
            put_u64(out, g.fence.get());
            put_u64(out, g.deadline.as_millis());
        }
        Response::Timeout => out.push(3),
        Response::Acquire(Err(e)) => error(out, 4, e),
        Response::Done(Err(e)) => error(out, 5, e),
        Response::Extend(Err(e)) => error(out, 6, e),
        Response::Malformed => out.push(7),
        Response::Release(Ok(o)) => {
            out.push(8);
            let (kind, until) = match *o {
                ReleaseOutcome::Released => (0, 0),
                ReleaseOutcome::HeldUntil { until } => (1, until.as_millis()),
            };
            out.push(kind);
            put_u64(out, until);
        }
        Response::Release(Err(e)) => error(out, 9, e),
    }
}

/// The responses in `bytes`, in order.
///
/// # Errors
/// A [`WireError`] at the first byte that does not decode.
pub fn decode_responses(bytes: &[u8]) -> Result<Vec<Response>, WireError> {
    let mut r = Reader::new(bytes);
    let mut out = Vec::new();
    while !r.done() {
        let start = r.at;
        let fail = WireError { offset: start };
        let tag = r.u8().ok_or(fail)?;
        let error = |r: &mut Reader<'_>| -> Result<LockError, WireError> {
            let index = r.u8().ok_or(fail)?;
            let (a, b) = (r.u64().ok_or(fail)?, r.u64().ok_or(fail)?);
            error_from_parts(index, a, b).ok_or(fail)
        };
        out.push(match tag {
            0 => {
                let kind = r.u8().ok_or(fail)?;
                let (a, b) = (r.u64().ok_or(fail)?, r.u64().ok_or(fail)?);
                let g = Grant {
                    fence: Fence::new(a),
                    deadline: Instant::from_millis(b),
                };
                let position = usize::try_from(a).map_err(|_| fail);
                Response::Acquire(Ok(match kind {
                    0 => AcquireOutcome::Acquired(g),
                    1 => AcquireOutcome::AlreadyHeld(g),
                    2 => AcquireOutcome::Queued {
                        position: position?,
                    },
                    3 => AcquireOutcome::AlreadyWaiting {
                        position: position?,
                    },
                    _ => return Err(fail),
                }))
            }
            1 => Response::Done(Ok(())),
            2 => Response::Extend(Ok(Grant {
                fence: Fence::new(r.u64().ok_or(fail)?),
                deadline: Instant::from_millis(r.u64().ok_or(fail)?),
            })),
            3 => Response::Timeout,
            4 => Response::Acquire(Err(error(&mut r)?)),
            5 => Response::Done(Err(error(&mut r)?)),
            6 => Response::Extend(Err(error(&mut r)?)),
            7 => Response::Malformed,
            8 => {
                let kind = r.u8().ok_or(fail)?;
                let until = Instant::from_millis(r.u64().ok_or(fail)?);
                Response::Release(Ok(match kind {
                    0 => ReleaseOutcome::Released,
                    1 => ReleaseOutcome::HeldUntil { until },
                    _ => return Err(fail),
                }))
            }
            9 => Response::Release(Err(error(&mut r)?)),
            _ => return Err(fail),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn every_response_round_trips() {
        let g = Grant {
            fence: Fence(9),
            deadline: Instant(u64::MAX),
        };
        let mut responses = vec![
            Response::Acquire(Ok(AcquireOutcome::Acquired(g))),
            Response::Acquire(Ok(AcquireOutcome::AlreadyHeld(g))),
            Response::Acquire(Ok(AcquireOutcome::Queued { position: 3 })),
            Response::Acquire(Ok(AcquireOutcome::AlreadyWaiting { position: 1 })),
            Response::Done(Ok(())),
            Response::Extend(Ok(g)),
            Response::Timeout,
            Response::Malformed,
        ];
        assert_eq!(LockError::examples().len(), LockError::CODES.len());
        for e in LockError::examples() {
            responses.push(Response::Acquire(Err(e.clone())));
            responses.push(Response::Done(Err(e.clone())));
            responses.push(Response::Extend(Err(e)));
        }
        let mut bytes = Vec::new();
        for r in &responses {
            encode_response(&mut bytes, r);
        }
        assert_eq!(decode_responses(&bytes).unwrap(), responses);
        // every strict prefix that cuts a response is refused
        assert!(decode_responses(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(
            decode_responses(&[9]).unwrap_err().to_string(),
            "malformed batch response at byte 0"
        );
    }

    #[test]
    fn every_request_round_trips_and_bad_bytes_stop_the_batch() {
        let requests = [
            Request::TryAcquire {
                key: "ジョブ",
                owner: "a",
                ttl: Duration(1),
                now: Instant(2),
            },
            Request::Acquire {
                key: "k",
                owner: "b",
                ttl: Duration(3),
                wait_deadline: Instant(4),
                now: Instant(5),
            },
            Request::Release {
                key: "k",
                owner: "a",
                fence: Fence(6),
                now: Instant(7),
            },
            Request::Extend {
                key: "k",
                owner: "a",
                fence: Fence(8),
                ttl: Duration(9),
                now: Instant(10),
            },
            Request::CancelWait {
                key: "k",
                owner: "b",
                now: Instant(11),
            },
            Request::HandleTimeout {
                now: Instant(u64::MAX),
            },
            Request::RenewWait {
                key: "k",
                owner: "c",
                wait_deadline: Instant(13),
                now: Instant(12),
            },
        ];
        let (mut bytes, mut names) = (Vec::new(), String::new());
        for r in &requests {
            encode_request(&mut bytes, &mut names, r);
        }
        assert_eq!(names, "ジョブakbkakakbkc");
        let decoded: Vec<_> = decode_requests(&bytes, &names).collect();
        assert_eq!(decoded, requests.iter().map(|r| Ok(*r)).collect::<Vec<_>>());
        // Text left after the last request is ignored.
        let more = alloc::format!("{names}unused");
        assert_eq!(decode_requests(&bytes, &more).count(), requests.len());
        // A cut, an unknown op, names running out or splitting a character: one error (at the
        // request's first byte), then nothing.
        let cut: Vec<_> = decode_requests(&bytes[..bytes.len() - 3], &names).collect();
        assert_eq!(cut.len(), requests.len());
        assert!(cut.last().unwrap().is_err());
        let mut bad_op = bytes.clone();
        bad_op[0] = 42;
        assert_eq!(
            decode_requests(&bad_op, &names).collect::<Vec<_>>(),
            [Err(0)]
        );
        let short = &names[..names.len() - 1];
        let decoded: Vec<_> = decode_requests(&bytes, short).collect();
        // renew-wait's owner is cut: six requests, then the error
        assert_eq!(decoded.len(), 7);
        assert!(decoded.last().unwrap().is_err());
        let mut one = Vec::new();
        encode_request(&mut one, &mut String::new(), &requests[0]);
        let mut split_char = one.clone();
        split_char[9..13].copy_from_slice(&4u32.to_le_bytes()); // inside ョ
        assert_eq!(
            decode_requests(&split_char, &names).collect::<Vec<_>>(),
            [Err(0)]
        );
        let mut too_long = one.clone();
        too_long[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            decode_requests(&too_long, &names).collect::<Vec<_>>(),
            [Err(0)]
        );
    }
}
