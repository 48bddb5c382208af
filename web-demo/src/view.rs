//! HTML for the dynamic parts of the page, as strings built from the model (pure, so it is
//! tested natively). The static frame (controls, panels) is `static/index.html`.

use std::collections::BTreeMap;
use std::fmt::Write;

use lock_core::{KeyInfo, LeaseEnd, Mode};

use crate::app::{secs, Client, End, KindFields, Playground, Segment, WaitEnd, WaitSegment};

/// Text safe to put in HTML content or a quoted attribute.
#[must_use]
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The state of every key that has a holder now.
pub fn key_infos(p: &mut Playground) -> BTreeMap<String, KeyInfo> {
    let keys = p.keys.clone();
    keys.into_iter()
        .filter_map(|k| p.inspect(&k).map(|info| (k, info)))
        .collect()
}

/// The client cards (rendered again only when clients are added or removed).
#[must_use]
pub fn clients(p: &Playground) -> String {
    let mut html = String::new();
    for c in &p.clients {
        client_card(&mut html, c);
    }
    if p.clients.is_empty() {
        html.push_str("<p class=\"empty\">No clients. Add one to start.</p>");
    }
    html
}

fn client_card(html: &mut String, c: &Client) {
    let id = c.id;
    let field = |html: &mut String, name: &str, label: &str, value: &str, extra: &str| {
        let _ = write!(
            html,
            "<label class=\"field\"><span>{label}</span><input data-field=\"{name}\" \
             data-client=\"{id}\" value=\"{}\" {extra} aria-describedby=\"error-{id}-{name}\">\
             <small class=\"field-error\" id=\"error-{id}-{name}\" role=\"alert\"></small></label>",
            esc(value)
        );
    };
    let _ = write!(
        html,
        "<article class=\"client\" data-client-card=\"{id}\"><header><strong>{}</strong>\
         <span class=\"client-status\" id=\"status-{id}\">idle</span>\
         <button class=\"remove\" data-action=\"remove\" data-client=\"{id}\" \
         title=\"Remove this client (it does not release its leases, like a crashed process)\">\
         Remove</button></header><div class=\"fields\">",
        esc(&c.name)
    );
    field(
        html,
        "key",
        "Key",
        &c.key,
        "list=\"key-list\" autocomplete=\"off\" spellcheck=\"false\"",
    );
    field(
        html,
        "ttl",
        "TTL (ms)",
        &c.ttl,
        "inputmode=\"numeric\" autocomplete=\"off\"",
    );
    field(
        html,
        "wait",
        "Wait up to (ms)",
        &c.wait,
        "inputmode=\"numeric\" autocomplete=\"off\"",
    );
    html.push_str("</div>");
    kind_fields(html, c);
    html.push_str("<div class=\"actions\">");
    for (action, label) in [
        ("try-acquire", "Try acquire"),
        ("acquire", "Acquire (wait)"),
        ("release", "Release"),
        ("extend", "Extend"),
        ("cancel-wait", "Cancel wait"),
        ("steal", "Steal"),
        ("write", "Write to storage"),
    ] {
        let _ = write!(
            html,
            "<button data-action=\"{action}\" data-client=\"{id}\">{label}</button>"
        );
    }
    html.push_str("</div></article>");
}

/// The lock-kind fields of a client's card, folded under "Lock kind" (open when one is set).
fn kind_fields(html: &mut String, c: &Client) {
    let id = c.id;
    let k = &c.kind;
    let open = if *k == KindFields::default() {
        ""
    } else {
        " open"
    };
    let summary = kind_summary(c);
    let _ = write!(
        html,
        "<details class=\"kind\"{open}><summary>Lock kind: <span id=\"kind-{id}\">{summary}</span></summary>\
         <div class=\"fields\"><label class=\"field\"><span>Mode</span>\
         <select data-field=\"mode\" data-client=\"{id}\" aria-describedby=\"error-{id}-mode\">"
    );
    for mode in ["exclusive", "shared"] {
        let selected = if k.mode == mode { " selected" } else { "" };
        let _ = write!(html, "<option value=\"{mode}\"{selected}>{mode}</option>");
    }
    html.push_str("</select>");
    let _ = write!(
        html,
        "<small class=\"field-error\" id=\"error-{id}-mode\" role=\"alert\"></small></label>"
    );
    for (field, label, value, title) in [
        (
            "permits",
            "Permits",
            &k.permits,
            "How many leases the key allows at once (a semaphore); 0: a plain lock",
        ),
        (
            "min-hold",
            "Min hold (ms)",
            &k.min_hold,
            "A release before this keeps the key taken until then (ShedLock's lockAtLeastFor)",
        ),
        (
            "lock-delay",
            "Lock-delay (ms)",
            &k.lock_delay,
            "After an expiry or a steal, nobody gets the key for this long (Consul's lock-delay)",
        ),
        (
            "metadata",
            "Metadata",
            &k.metadata,
            "Who holds it and why: shown by inspection, query and events",
        ),
    ] {
        let _ = write!(
            html,
            "<label class=\"field\" title=\"{title}\"><span>{label}</span><input data-field=\"{field}\" \
             data-client=\"{id}\" value=\"{}\" autocomplete=\"off\" aria-describedby=\"error-{id}-{field}\">\
             <small class=\"field-error\" id=\"error-{id}-{field}\" role=\"alert\"></small></label>",
            esc(value)
        );
    }
    html.push_str("</div></details>");
}

/// A client's lock kind in a few words (HTML-escaped): "plain exclusive lock", or its mode and
/// every option it sets.
#[must_use]
pub fn kind_summary(c: &Client) -> String {
    let k = &c.kind;
    if *k == KindFields::default() {
        return "plain exclusive lock".to_owned();
    }
    let mut parts = vec![k.mode.clone()];
    let set = |v: &str| !v.trim().is_empty() && v.trim() != "0";
    if set(&k.permits) {
        parts.push(format!("{} permits", k.permits.trim()));
    }
    if set(&k.min_hold) {
        parts.push(format!("min hold {} ms", k.min_hold.trim()));
    }
    if set(&k.lock_delay) {
        parts.push(format!("lock-delay {} ms", k.lock_delay.trim()));
    }
    if !k.metadata.is_empty() {
        parts.push(format!("\u{201c}{}\u{201d}", k.metadata));
    }
    esc(&parts.join(", "))
}

/// The query view: every key in use whose name starts with `prefix`, its leases (held) and its
/// waiters (pending), as Web Locks' `navigator.locks.query()` lists them, with our fences,
/// deadlines and metadata.
#[must_use]
pub fn query(p: &mut Playground, prefix: &str, limit: usize) -> String {
    let page = match p.query(prefix, limit) {
        Ok(page) => page,
        Err(why) => return format!("<p class=\"error visible\">{}</p>", esc(&why)),
    };
    if page.keys.is_empty() {
        return "<p class=\"muted\">No key in use matches.</p>".into();
    }
    let now = p.clock.now();
    let mut held = String::new();
    let mut pending = String::new();
    for (key, info) in &page.keys {
        for h in &info.holders {
            let state = match h.ended {
                None => format!("{} left", secs(h.deadline.0.saturating_sub(now))),
                Some(why) => format!("{}, place kept until {}", why.name(), secs(h.deadline.0)),
            };
            let _ = write!(
                held,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{state}</td><td>{}</td></tr>",
                esc(key),
                esc(&h.owner),
                h.mode.name(),
                h.fence,
                esc(&h.metadata)
            );
        }
        for w in &info.waiters {
            let _ = write!(
                pending,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>until {}</td><td>{}</td></tr>",
                esc(key),
                esc(&w.owner),
                w.mode.name(),
                secs(w.wait_deadline.0),
                esc(&w.metadata)
            );
        }
    }
    let more = if page.next.is_some() {
        format!("<p class=\"muted\">More keys match: the first {limit} are shown.</p>")
    } else {
        String::new()
    };
    let pending = if pending.is_empty() {
        "<p class=\"muted\">Nobody waits.</p>".to_owned()
    } else {
        format!(
            "<table class=\"query pending\"><caption>pending</caption><thead><tr><th>key</th><th>owner</th>\
             <th>mode</th><th>waits</th><th>metadata</th></tr></thead><tbody>{pending}</tbody></table>"
        )
    };
    format!(
        "<table class=\"query held\"><caption>held</caption><thead><tr><th>key</th><th>owner</th><th>mode</th>\
         <th>fence</th><th>state</th><th>metadata</th></tr></thead><tbody>{held}</tbody></table>{pending}{more}"
    )
}

/// The `<option>`s of the key list.
#[must_use]
pub fn key_options(p: &Playground) -> String {
    p.keys
        .iter()
        .map(|k| format!("<option value=\"{}\"></option>", esc(k)))
        .collect()
}

/// One client's status line: what it holds and what it waits for.
#[must_use]
pub fn client_status(c: &Client, infos: &BTreeMap<String, KeyInfo>, now: u64) -> String {
    let mut parts = Vec::new();
    for (key, info) in infos {
        for h in (info.holders.iter()).filter(|h| h.owner == c.name && h.ended.is_none()) {
            let mode = if h.mode == Mode::Shared {
                " shared"
            } else {
                ""
            };
            parts.push(format!(
                "holds \"{key}\"{mode} (fence {}, {} left)",
                h.fence,
                secs(h.deadline.0.saturating_sub(now))
            ));
        }
        if let Some(place) = info.waiters.iter().position(|w| w.owner == c.name) {
            parts.push(format!("waits for \"{key}\" (place {})", place + 1));
        }
    }
    if parts.is_empty() {
        "idle".into()
    } else {
        parts.join("; ")
    }
}

fn pct(t: u64, from: u64, span: u64) -> f64 {
    (t.saturating_sub(from).min(span) as f64) * 100.0 / span as f64
}

/// The timeline: one track per key that has history, with holder bars (fence numbers on them),
/// hand-off and expiry marks, a "now" line, and the FIFO queue.
#[must_use]
pub fn timeline(p: &Playground, infos: &BTreeMap<String, KeyInfo>) -> String {
    let now = p.clock.now();
    let (from, span) = p.view.window(now);
    let to = from + span;
    let mut html = String::new();
    let mut keys: Vec<&String> = p.history.keys().collect();
    for k in infos.keys() {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if keys.is_empty() {
        return "<p class=\"empty\">No lock has been taken yet. Pick a client and press \
                <em>Try acquire</em>.</p>"
            .into();
    }
    let now_pct = pct(now, from, span);
    for key in keys {
        let segments = p.history.get(key).map(Vec::as_slice).unwrap_or_default();
        let lanes = segments.iter().map(|s| s.lane + 1).max().unwrap_or(1);
        let _ = write!(
            html,
            "<div class=\"key-row\" data-key=\"{k}\"><div class=\"key-name\" title=\"{k}\">{k}</div>\
             <div class=\"track\" style=\"height:{h}px\">",
            k = esc(key),
            h = 8 + LANE_PX * lanes
        );
        for s in segments {
            segment(&mut html, s, from, span);
        }
        if (from..=to).contains(&now) {
            let _ = write!(
                html,
                "<div class=\"now-line\" style=\"left:{now_pct:.3}%\"></div>"
            );
        }
        html.push_str("</div>");
        html.push_str(&wait_track(p, key, from, span, now));
        html.push_str("<div class=\"key-state\">");
        match infos.get(key) {
            Some(info) => key_state(&mut html, info, now),
            None => html.push_str("<span class=\"free\">free</span>"),
        }
        html.push_str("</div></div>");
    }
    html
}

/// The height of one lane of a key's track, in px.
const LANE_PX: usize = 26;

/// One lease's bar in its lane, its marks (hand-off, loss, minimum hold) and the place it kept
/// after it ended (hatched), if any of it falls in the window.
fn segment(html: &mut String, s: &Segment, from: u64, span: u64) {
    let to = from + span;
    let end = s.end.map_or(s.deadline, |(at, _)| at);
    let kept = s.kept_until.filter(|k| *k > end);
    if kept.unwrap_or(end) < from || s.start > to {
        return;
    }
    let top = 4 + LANE_PX * s.lane;
    let left = pct(s.start, from, span);
    let width = (pct(end, from, span) - left).max(0.4);
    let (state, how) = match s.end {
        None => ("live", "live"),
        Some((_, End::Released)) => ("released", "released"),
        Some((_, End::Expired)) => ("expired", "expired"),
        Some((_, End::Stolen)) => ("stolen", "stolen"),
    };
    let handoff = if s.handoff { " handoff" } else { "" };
    let shared = if s.shared { " shared" } else { "" };
    let mode = if s.shared { " (shared)" } else { "" };
    let meta = if s.metadata.is_empty() {
        String::new()
    } else {
        format!(", \u{201c}{}\u{201d}", esc(&s.metadata))
    };
    let _ = write!(
        html,
        "<div class=\"seg {state}{handoff}{shared}\" style=\"left:{left:.3}%;width:{width:.3}%;top:{top}px\" \
         data-fence=\"{f}\" title=\"{o}{mode}: fence {f}, {from_t} to {to_t}, {how}{meta}\">\
         <span>{o} #{f}</span></div>",
        o = esc(&s.owner),
        f = s.fence,
        from_t = secs(s.start),
        to_t = secs(end),
    );
    if let Some(kept) = kept {
        let why = match s.end {
            Some((_, End::Released)) => "released before its minimum hold",
            Some((_, End::Stolen)) => "lock-delay after the steal",
            _ => "lock-delay after the expiry",
        };
        let k_left = pct(end, from, span);
        let k_width = (pct(kept, from, span) - k_left).max(0.4);
        let _ = write!(
            html,
            "<div class=\"seg kept\" style=\"left:{k_left:.3}%;width:{k_width:.3}%;top:{top}px\" \
             title=\"{o}'s place kept until {t} ({why}): nobody is granted it before\"></div>",
            o = esc(&s.owner),
            t = secs(kept),
        );
    }
    if let Some(min) = s
        .min_until
        .filter(|m| s.end.is_none() && (from..=to).contains(m))
    {
        let _ = write!(
            html,
            "<div class=\"mark min-hold-mark\" style=\"left:{:.3}%;top:{top}px\" \
             title=\"{}'s minimum hold: a release before {} keeps the key taken until then\">|</div>",
            pct(min, from, span),
            esc(&s.owner),
            secs(min)
        );
    }
    if s.handoff && s.start >= from && s.start <= to {
        let _ = write!(
            html,
            "<div class=\"mark handoff-mark\" style=\"left:{left:.3}%\" \
             title=\"hand-off to {} at {}\">&#9654;</div>",
            esc(&s.owner),
            secs(s.start)
        );
    }
    if let Some((at, why)) = s
        .end
        .filter(|(at, e)| *e != End::Released && (from..=to).contains(at))
    {
        let verb = if why == End::Stolen {
            "had the lock stolen"
        } else {
            "lost the lock"
        };
        let _ = write!(
            html,
            "<div class=\"mark expiry-mark\" style=\"left:{:.3}%\" \
             title=\"{} {verb} at {}\">&#10005;</div>",
            pct(at, from, span),
            esc(&s.owner),
            secs(at)
        );
    }
}

/// A key's leases (live and kept), permits and queue, in words.
fn key_state(html: &mut String, info: &KeyInfo, now: u64) {
    for h in &info.holders {
        let mode = if h.mode == Mode::Shared {
            " shared"
        } else {
            ""
        };
        let meta = if h.metadata.is_empty() {
            String::new()
        } else {
            format!(" (\u{201c}{}\u{201d})", esc(&h.metadata))
        };
        let _ = match h.ended {
            None => write!(
                html,
                "<span class=\"holder\">{} holds it{mode}, fence {}, {} left{meta}</span>",
                esc(&h.owner),
                h.fence,
                secs(h.deadline.0.saturating_sub(now))
            ),
            Some(why) => write!(
                html,
                "<span class=\"kept-place\">{}'s place is kept until {} ({}){meta}</span>",
                esc(&h.owner),
                secs(h.deadline.0),
                match why {
                    LeaseEnd::Released => "minimum hold",
                    LeaseEnd::Expired => "lock-delay after expiry",
                    LeaseEnd::Stolen => "lock-delay after steal",
                }
            ),
        };
    }
    if info.permits != 0 {
        let _ = write!(
            html,
            "<span class=\"permits\">{} of {} permits in use</span>",
            info.holders.len(),
            info.permits
        );
    }
    if !info.waiters.is_empty() {
        html.push_str("<ol class=\"queue\" aria-label=\"wait queue\">");
        for w in &info.waiters {
            let mode = if w.mode == Mode::Shared {
                " (shared)"
            } else {
                ""
            };
            let _ = write!(
                html,
                "<li title=\"waits until {}; will hold it for {}\">{}{mode}</li>",
                secs(w.wait_deadline.0),
                secs(w.ttl.0),
                esc(&w.owner)
            );
        }
        html.push_str("</ol>");
    }
}

/// The waits on `key` that overlap the window, as thin bars in their own lane under the key's
/// track (so they never cover a lease bar or a mark); empty if there are none.
fn wait_track(p: &Playground, key: &str, from: u64, span: u64, now: u64) -> String {
    let to = from + span;
    let waits: Vec<&WaitSegment> = p
        .waits
        .get(key)
        .map(|ws| {
            ws.iter()
                .filter(|w| w.start <= to && w.end.map_or(now, |(at, _)| at) >= from)
                .collect()
        })
        .unwrap_or_default();
    if waits.is_empty() {
        return String::new();
    }
    let mut html = String::from("<div class=\"wait-track\" aria-label=\"waits\">");
    for (lane, w) in waits.iter().enumerate() {
        let end = w.end.map_or(now, |(at, _)| at);
        let left = pct(w.start, from, span);
        let width = (pct(end, from, span) - left).max(0.4);
        let (class, how) = match w.end {
            None => (
                "waiting",
                format!("waiting, gives up at {}", secs(w.wait_deadline)),
            ),
            Some((at, WaitEnd::Granted)) => ("granted", format!("handed the lock at {}", secs(at))),
            Some((at, WaitEnd::TimedOut)) => ("timed-out", format!("gave up at {}", secs(at))),
            Some((at, WaitEnd::Cancelled)) => ("cancelled", format!("cancelled at {}", secs(at))),
        };
        let _ = write!(
            html,
            "<div class=\"wait-seg {class}\" style=\"left:{left:.3}%;width:{width:.3}%;top:{top}px\" \
             title=\"{o} waited from {start}: {how}\"></div>",
            top = 1 + (lane % 3) * 4,
            o = esc(&w.owner),
            start = secs(w.start),
        );
    }
    html.push_str("</div>");
    html
}

/// What the timeline shows, in words: its window and whether it follows the clock.
#[must_use]
pub fn timeline_window(p: &Playground) -> String {
    let now = p.clock.now();
    let (from, span) = p.view.window(now);
    let how = if p.view.pinned_end.is_some() {
        "panned; Now follows the clock again"
    } else {
        "following the clock; the vertical line is now"
    };
    format!("{} to {} ({how})", secs(from), secs(from + span))
}

/// The protected storage: per key, the newest fencing token it accepted, and the latest writes
/// (newest first, at most `limit`), each accepted or refused as stale.
#[must_use]
pub fn storage(p: &Playground, limit: usize) -> String {
    let s = &p.storage;
    if s.writes.is_empty() {
        return "<p class=\"muted\">Nothing written yet. A client that holds a key can write to \
                the storage with its fencing token; the storage refuses a token older than one it \
                has accepted.</p>"
            .into();
    }
    let mut html = String::from("<ul class=\"newest\">");
    for (key, fence) in s.keys() {
        let _ = write!(
            html,
            "<li>\"{}\": newest fence <strong>{fence}</strong></li>",
            esc(key)
        );
    }
    html.push_str("</ul><ol class=\"writes\" reversed>");
    for w in s.writes.iter().rev().take(limit) {
        let (class, verdict) = if w.accepted {
            ("accepted", "accepted".to_owned())
        } else {
            (
                "refused",
                format!("refused: older than fence {}", w.newest_before),
            )
        };
        let _ = write!(
            html,
            "<li class=\"{class}\"><time>{}</time> {} wrote \"{}\" with fence {}: {verdict}</li>",
            secs(w.at),
            esc(&w.owner),
            esc(&w.key),
            w.fence
        );
    }
    html.push_str("</ol>");
    html
}

/// The newest log lines first (at most `limit`).
#[must_use]
pub fn log(p: &Playground, limit: usize) -> String {
    if p.log.is_empty() {
        return "<li class=\"info\">Nothing yet.</li>".into();
    }
    p.log
        .iter()
        .rev()
        .take(limit)
        .map(|l| {
            format!(
                "<li class=\"{}\"><time>{}</time> {}</li>",
                l.kind.class(),
                secs(l.at),
                esc(&l.text)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Action;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn the_timeline_shows_holder_fence_queue_handoff_and_expiry() {
        let mut p = Playground::new();
        p.set_field(1, crate::app::Field::Ttl, Some("1000"))
            .unwrap();
        p.act(1, Action::TryAcquire).unwrap();
        p.act(2, Action::Acquire).unwrap();
        let infos = key_infos(&mut p);
        let html = timeline(&p, &infos);
        assert!(html.contains("client-1 holds it, fence 1"), "{html}");
        assert!(html.contains("<ol class=\"queue\""), "{html}");
        assert!(html.contains(">client-2</li>"), "{html}");
        p.step(1000);
        let infos = key_infos(&mut p);
        let html = timeline(&p, &infos);
        assert!(html.contains("expiry-mark"), "{html}");
        assert!(html.contains("handoff-mark"), "{html}");
        assert!(html.contains("client-2 holds it, fence 2"), "{html}");
        let status = client_status(&p.clients[1], &infos, p.clock.now());
        assert_eq!(
            status,
            "holds \"job:nightly-report\" (fence 2, 3.000 s left)"
        );
    }
}
