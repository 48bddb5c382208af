//! The lock kinds in the playground: what the cards send, what the timeline, the key state, the
//! query view and the log show, and that a session using them exports as a passing vector file.

use super::tests::exported_session_passes;
use super::*;
use crate::view;

const KEY: &str = "job:nightly-report";

fn kind(p: &mut Playground, id: u32, fields: &[(Field, &str)]) {
    for (field, value) in fields {
        p.set_field(id, *field, Some(value)).unwrap();
    }
}

fn timeline(p: &mut Playground) -> String {
    let infos = view::key_infos(p);
    view::timeline(p, &infos)
}

#[test]
fn shared_holders_are_drawn_side_by_side_and_a_writer_waits_behind_them() {
    let mut p = Playground::new();
    p.add_client();
    for id in [1, 2] {
        kind(
            &mut p,
            id,
            &[(Field::Mode, "shared"), (Field::Permits, "3")],
        );
        p.act(id, Action::TryAcquire).unwrap();
    }
    // Exclusive, on a key of 3 permits (a request names the key's permits): waits for both.
    kind(&mut p, 3, &[(Field::Permits, "3")]);
    p.act(3, Action::Acquire).unwrap();
    let lanes: Vec<(usize, bool)> = p.history[KEY].iter().map(|s| (s.lane, s.shared)).collect();
    assert_eq!(lanes, [(0, true), (1, true)]);
    let html = timeline(&mut p);
    assert!(html.contains("height:60px"), "two lanes: {html}");
    assert!(html.contains("seg live shared\" style=\"left:0.000%;width:15.000%;top:4px"));
    assert!(html.contains("top:30px"), "{html}");
    assert!(html.contains("client-1 holds it shared, fence 1"), "{html}");
    assert!(html.contains("client-2 holds it shared, fence 2"), "{html}");
    assert!(html.contains("2 of 3 permits in use"), "{html}");
    assert!(html.contains(">client-3</li>"), "{html}");
    let infos = view::key_infos(&mut p);
    assert_eq!(
        view::client_status(&p.clients[1], &infos, p.clock.now()),
        "holds \"job:nightly-report\" shared (fence 2, 3.000 s left)"
    );
    // Both readers leave: the writer is handed the key, in lane 0 again.
    p.act(1, Action::Release).unwrap();
    assert!(
        p.inspect(KEY).unwrap().waiters.len() == 1,
        "one reader left"
    );
    p.act(2, Action::Release).unwrap();
    let last = p.history[KEY].last().unwrap();
    assert_eq!(
        (last.owner.as_str(), last.lane, last.shared),
        ("client-3", 0, false)
    );
    assert!(last.handoff);
    // A request that disagrees with the key's permits is refused by the core, in its words.
    kind(&mut p, 1, &[(Field::Permits, "2")]);
    p.act(1, Action::TryAcquire).unwrap();
    assert_eq!(p.log.last().unwrap().kind, LineKind::Refused);
    exported_session_passes(&p);
}

#[test]
fn a_steal_ends_the_holder_s_lease_and_its_late_release_hears_stolen() {
    let mut p = Playground::new();
    p.act(1, Action::TryAcquire).unwrap();
    p.step(500);
    p.act(2, Action::Steal).unwrap();
    let h = &p.history[KEY];
    assert_eq!(h[0].end, Some((500, End::Stolen)));
    assert_eq!((h[1].owner.as_str(), h[1].fence), ("client-2", 2));
    let texts: Vec<&str> = p.log.iter().map(|l| l.text.as_str()).collect();
    assert!(texts.contains(&"client-2 stole \"job:nightly-report\": fence 2, until 3.500 s"));
    assert!(texts.contains(
        &"client-1 lost \"job:nightly-report\": its lease (fence 1) was stolen at 0.500 s"
    ));
    let html = timeline(&mut p);
    assert!(html.contains("seg stolen"), "{html}");
    assert!(
        html.contains("client-1 had the lock stolen at 0.500 s"),
        "{html}"
    );
    // Like a paused holder, client-1 still has its fence until it is told.
    assert_eq!(p.client(1).unwrap().fences.get(KEY), Some(&1));
    p.act(1, Action::Release).unwrap();
    assert!(
        p.log.last().unwrap().text.contains("stolen"),
        "{:?}",
        p.log.last()
    );
    assert!(
        p.client(1).unwrap().fences.is_empty(),
        "told, it forgets the fence"
    );
    exported_session_passes(&p);
}

#[test]
fn kept_places_show_on_the_track_until_the_core_frees_them() {
    // A minimum hold: released early, the place is kept (hatched) until the minimum.
    let mut p = Playground::new();
    kind(&mut p, 1, &[(Field::MinHold, "2000")]);
    p.act(1, Action::TryAcquire).unwrap();
    assert_eq!(p.history[KEY][0].min_until, Some(2000));
    assert!(timeline(&mut p).contains("min-hold-mark"));
    p.step(500);
    p.act(1, Action::Release).unwrap();
    let s = &p.history[KEY][0];
    assert_eq!(
        (s.end, s.kept_until),
        (Some((500, End::Released)), Some(2000))
    );
    let html = timeline(&mut p);
    assert!(html.contains("seg kept"), "{html}");
    assert!(
        html.contains("client-1's place is kept until 2.000 s (minimum hold)"),
        "{html}"
    );
    assert!(
        p.client(1).unwrap().fences.is_empty(),
        "a released lease is no longer held"
    );
    p.act(2, Action::TryAcquire).unwrap();
    assert_eq!(p.log.last().unwrap().kind, LineKind::Refused);
    p.step(1500);
    p.act(2, Action::TryAcquire).unwrap();
    assert_eq!(p.log.last().unwrap().kind, LineKind::Grant);
    exported_session_passes(&p);

    // A lock-delay: after an expiry the place is kept for the delay, then a waiter is handed it.
    let mut p = Playground::new();
    kind(&mut p, 1, &[(Field::LockDelay, "1000")]);
    p.set_field(1, Field::Ttl, Some("1000")).unwrap();
    p.act(1, Action::TryAcquire).unwrap();
    p.act(2, Action::Acquire).unwrap();
    p.step(1000);
    let s = &p.history[KEY][0];
    assert_eq!(
        (s.end, s.kept_until),
        (Some((1000, End::Expired)), Some(2000))
    );
    assert!(timeline(&mut p)
        .contains("client-1's place is kept until 2.000 s (lock-delay after expiry)"));
    p.step(1000);
    let last = p.history[KEY].last().unwrap();
    assert_eq!(
        (last.owner.as_str(), last.start, last.lane),
        ("client-2", 2000, 0)
    );
    exported_session_passes(&p);
}

#[test]
fn the_query_view_lists_leases_and_requests_with_their_metadata() {
    let mut p = Playground::new();
    kind(&mut p, 1, &[(Field::Metadata, "host-3 <pid 7>")]);
    p.act(1, Action::TryAcquire).unwrap();
    kind(
        &mut p,
        2,
        &[(Field::Mode, "shared"), (Field::Metadata, "host-9")],
    );
    p.act(2, Action::Acquire).unwrap();
    let html = view::query(&mut p, "job:", 50);
    assert!(html.contains("<td>job:nightly-report</td><td>client-1</td><td>exclusive</td><td>1</td><td>3.000 s left</td><td>host-3 &lt;pid 7&gt;</td>"), "{html}");
    assert!(
        html.contains("<td>client-2</td><td>shared</td><td>until 5.000 s</td><td>host-9</td>"),
        "{html}"
    );
    assert!(view::query(&mut p, "db:", 50).contains("No key in use matches"));
    // A bad prefix is the core's refusal, and the table is not asked (nothing counted).
    let rejected = p.table.stats(p.table.clock()).rejected;
    let html = view::query(&mut p, "job:\u{7}", 50);
    assert!(html.contains("class=\"error visible\""), "{html}");
    assert_eq!(p.table.stats(p.table.clock()).rejected, rejected);
    // One page: more keys than the page say so.
    p.set_field(1, Field::Key, Some("job:other")).unwrap();
    p.act(1, Action::TryAcquire).unwrap();
    assert!(view::query(&mut p, "", 1).contains("More keys match: the first 1 are shown"));
    exported_session_passes(&p);
}

#[test]
fn bad_kind_fields_are_refused_before_the_table() {
    let mut p = Playground::new();
    let cases = [
        (Field::Mode, "both", "the mode is exclusive or shared"),
        (
            Field::Permits,
            "-1",
            "permits must be a whole number (0: a plain lock)",
        ),
        (
            Field::MinHold,
            "1.5",
            "the minimum hold must be a whole number of milliseconds",
        ),
        (
            Field::LockDelay,
            "x",
            "the lock-delay must be a whole number of milliseconds",
        ),
    ];
    for (field, value, message) in cases {
        assert_eq!(
            p.set_field(1, field, Some(value)).unwrap_err().message,
            message
        );
        for action in [Action::TryAcquire, Action::Acquire, Action::Steal] {
            assert_eq!(p.act(1, action).unwrap_err().field, field);
        }
        let plain = if field == Field::Mode {
            "exclusive"
        } else {
            "0"
        };
        p.set_field(1, field, Some(plain)).unwrap();
    }
    let long = "m".repeat(10_000);
    let e = p.set_field(1, Field::Metadata, Some(&long)).unwrap_err();
    assert!(e.message.contains("metadata"), "{}", e.message);
    assert!(p.act(1, Action::TryAcquire).is_err());
    assert!(
        p.set_field(1, Field::Metadata, None).is_err(),
        "a lone surrogate"
    );
    assert!(p.act(1, Action::TryAcquire).is_err());
    assert_eq!(p.recorded_steps(), 0);
    assert!(p.log.is_empty());
}

#[test]
fn a_card_sums_its_lock_kind_up_in_a_few_words() {
    let mut p = Playground::new();
    assert_eq!(
        view::kind_summary(p.client(1).unwrap()),
        "plain exclusive lock"
    );
    assert!(
        !view::clients(&p).contains("<details class=\"kind\" open>"),
        "folded"
    );
    kind(
        &mut p,
        1,
        &[
            (Field::Mode, "shared"),
            (Field::Permits, "4"),
            (Field::LockDelay, "500"),
        ],
    );
    kind(&mut p, 1, &[(Field::Metadata, "<b>")]);
    assert_eq!(
        view::kind_summary(p.client(1).unwrap()),
        "shared, 4 permits, lock-delay 500 ms, \u{201c}&lt;b&gt;\u{201d}"
    );
    assert!(
        view::clients(&p).contains("<details class=\"kind\" open>"),
        "open once set"
    );
}

#[test]
fn a_replayed_step_shows_its_lock_kind_on_the_card() {
    let mut p = Playground::new();
    let i = (Playground::guide_names().iter())
        .position(|n| n.starts_with("a semaphore"))
        .unwrap();
    p.open_guide(i).unwrap();
    p.replay_step().unwrap();
    let c = &p.clients[0];
    assert_eq!(
        (c.kind.mode.as_str(), c.kind.permits.as_str()),
        ("shared", "3")
    );
}
