//! How `lockstore` shows what it read: instants as UTC times with what remains of them, durations
//! as people write them, and the same facts as JSON (`--json`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_store::{Instant, KeyInfo, LostLease};

/// Milliseconds since the Unix epoch on this machine's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `at` as a UTC time, `2026-12-03T18:20:01.123Z`.
pub fn utc(at: Instant) -> String {
    let ms = at.0;
    let (days, in_day) = (ms / 86_400_000, ms % 86_400_000);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm, proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// A duration as people write it: `750ms`, `29.6s`, `4m10s`, `2h5m`.
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// `at` with what remains of it on this machine's clock: `2026-...Z (in 29.6s)`.
pub fn until(at: Instant) -> String {
    let now = now_ms();
    let left = if at.0 >= now {
        format!("in {}", duration(Duration::from_millis(at.0 - now)))
    } else {
        format!("{} ago", duration(Duration::from_millis(now - at.0)))
    };
    format!("{} ({left})", utc(at))
}

/// An optional instant as JSON milliseconds since the Unix epoch, or `null`.
pub fn ms_or_null(at: Option<Instant>) -> String {
    at.map_or("null".into(), |m| m.0.to_string())
}

/// An optional instant as a JSON UTC text, or `null`.
pub fn utc_or_null(at: Option<Instant>) -> String {
    at.map_or("null".into(), |m| json_string(&utc(m)))
}

/// A key's state, for people.
pub fn key_text(key: &str, info: Option<&KeyInfo>) -> String {
    let Some(info) = info else {
        return format!("{key}: free");
    };
    let mut text = format!("{key}:");
    for (i, h) in info.holders.iter().enumerate() {
        let how = match (h.ended, h.mode) {
            (Some(end), _) => format!("kept after it was {} by", end.name()),
            (None, lock_core::Mode::Shared) => "held shared by".into(),
            (None, lock_core::Mode::Exclusive) => "held by".into(),
        };
        let sep = if i == 0 { " " } else { "\n  and " };
        let since = h
            .granted_at
            .map_or(String::new(), |at| format!(" since {},", until(at)));
        text.push_str(&format!(
            "{sep}{how} {} with fence {},{since} until {}",
            h.owner,
            h.fence.0,
            until(h.deadline)
        ));
        if !h.metadata.is_empty() {
            text.push_str(&format!(" ({})", h.metadata));
        }
    }
    if info.permits != 0 {
        text.push_str(&format!("\n  {} permits", info.permits));
    }
    for (i, w) in info.waiters.iter().enumerate() {
        // The wait it asked for; a waiter that keeps its place by renewals (see `WAIT_ALIVE`)
        // also shows when its next renewal is due.
        text.push_str(&format!(
            "\n  {}. {} waits until {} for a {} lease",
            i + 1,
            w.owner,
            until(w.wait_end),
            duration(Duration::from_millis(w.ttl.0)),
        ));
        if w.wait_end != w.wait_deadline {
            text.push_str(&format!(
                " (keeps its place while it renews it; next renewal due by {})",
                utc(w.wait_deadline)
            ));
        }
    }
    text
}

/// A JSON string literal.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key's state as one JSON object: `{"key":..,"state":"free"}` or with its `holder` and
/// `waiters` (instants as milliseconds since the Unix epoch and as UTC text).
pub fn key_json(key: &str, info: Option<&KeyInfo>) -> String {
    let Some(info) = info else {
        return format!("{{\"key\":{},\"state\":\"free\"}}", json_string(key));
    };
    let holders: Vec<String> = (info.holders.iter())
        .map(|h| {
            format!(
                "{{\"owner\":{},\"fence\":{},\"deadline_ms\":{},\"deadline\":{},\"mode\":{},\"metadata\":{},\"min_until_ms\":{},\"ended\":{},\"granted_at_ms\":{},\"granted_at\":{}}}",
                json_string(&h.owner),
                h.fence.0,
                h.deadline.0,
                json_string(&utc(h.deadline)),
                json_string(h.mode.name()),
                json_string(&h.metadata),
                ms_or_null(h.min_until),
                h.ended.map_or("null".into(), |e| json_string(e.name())),
                ms_or_null(h.granted_at),
                utc_or_null(h.granted_at),
            )
        })
        .collect();
    let waiters: Vec<String> = info
        .waiters
        .iter()
        .map(|w| {
            format!(
                "{{\"owner\":{},\"ttl_ms\":{},\"mode\":{},\"metadata\":{},\"wait_until_ms\":{},\"wait_until\":{},\"renew_by_ms\":{},\"renew_by\":{}}}",
                json_string(&w.owner),
                w.ttl.0,
                json_string(w.mode.name()),
                json_string(&w.metadata),
                w.wait_end.0,
                json_string(&utc(w.wait_end)),
                w.wait_deadline.0,
                json_string(&utc(w.wait_deadline))
            )
        })
        .collect();
    // `holder` is the first lease (the only one of a key held exclusively), kept for scripts
    // written before shared leases; `holders` lists every lease.
    format!(
        "{{\"key\":{},\"state\":\"held\",\"holder\":{},\"holders\":[{}],\"permits\":{},\"waiters\":[{}]}}",
        json_string(key),
        holders.first().map_or("null", String::as_str),
        holders.join(","),
        info.permits,
        waiters.join(",")
    )
}

/// Why a lease was lost, in words.
pub fn lost_why(lost: &LostLease) -> String {
    use lock_store::LockError;
    match &lost.refusal {
        None => "its deadline passed on this machine's clock without a successful extension (the store did not answer in time)".into(),
        Some(LockError::Expired { .. }) => "the store says it expired (no extension reached it in time)".into(),
        Some(LockError::NotHeld) => "its record is gone (the key is free: cleared, uninstalled, or lost by the store)".into(),
        Some(LockError::NotOwner) => "another owner holds the key now (handed on after it expired)".into(),
        Some(LockError::Stolen { at }) => format!("it was stolen at {} (another owner took the key by force)", utc(*at)),
        Some(other) => format!("the store refused its extension: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_are_civil_dates() {
        assert_eq!(utc(Instant(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(Instant(951_782_400_000)), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(Instant(1_796_322_001_123)), "2026-12-03T18:20:01.123Z");
    }

    #[test]
    fn durations_read_as_written() {
        assert_eq!(duration(Duration::from_millis(750)), "750ms");
        assert_eq!(duration(Duration::from_millis(29_600)), "29.6s");
        assert_eq!(duration(Duration::from_secs(250)), "4m10s");
        assert_eq!(duration(Duration::from_secs(7500)), "2h5m");
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
