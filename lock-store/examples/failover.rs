//! Leader election's failover, per store: how long after its leader dies, and after its leader
//! resigns, a follower's term begins (`docs/election.md`).
//!
//! ```text
//! cargo run --release -p lock-store --features all-stores --example failover -- [ROUNDS] [TTL_MS]
//! ```
//!
//! Each round, a leader takes the election's key and extends it every third of its TTL, and a
//! follower campaigns with `Election::run` (the recipe). **Kill**: at a random point of the
//! leader's extension cycle the leader stops (no release, no extension: as `kill -9`); the
//! failover is the time from then to the follower's body starting. Its floor in this design is
//! the rest of the leader's lease (its deadline minus the kill): the gap above it is the
//! follower's look (a hand-off notice over Redis and PostgreSQL, a 50 ms look over MariaDB and
//! SQLite). **Resign**: the leader is an `Election` too, and resigns; the failover is from the
//! resignation to the follower's body starting, and its floor is one release (timed on its own).
//! Server URLs: `LOCK_STORE_REDIS_URL`, `LOCK_STORE_POSTGRES_URL`, `LOCK_STORE_MYSQL_URL`.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use lock_store::election::{CampaignOptions, Election};
use lock_store::Locks;

const NAME: &str = "leader";

fn url(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// A follower campaigning on its own thread; answers when each of its terms began.
fn follower<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    locks: &'s Locks,
    ttl: Duration,
) -> (lock_store::election::Control, mpsc::Receiver<Instant>) {
    let (tx, rx) = mpsc::channel();
    let election = Election::new(locks, NAME, "follower", CampaignOptions::new(ttl.into()))
        .expect("good options");
    let control = election.control();
    scope.spawn(move || {
        election
            .run(|term| {
                let _ = tx.send(Instant::now());
                while term.wait_stop(Duration::from_millis(50)).is_none() {}
            })
            .expect("the follower campaigns");
    });
    (control, rx)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// A kill round: the leader holds the key, `start_follower` starts a follower campaigning, and
/// the leader dies at `phase` of its extension cycle. Answers the failover and its floor (ms).
fn round_kill(
    leader: &Locks,
    start_follower: impl FnOnce() -> mpsc::Receiver<Instant>,
    ttl: Duration,
    phase: f64,
) -> (f64, f64) {
    let lease = leader
        .acquire(NAME, "leader", ttl, Duration::from_secs(30))
        .expect("the leader takes the key");
    let follower_at = start_follower();
    // Extend once, then die at `phase` of the next extension cycle.
    std::thread::sleep(ttl / 3);
    lease.extend(ttl).expect("extended");
    let extended = Instant::now();
    std::thread::sleep(ttl.mul_f64(phase / 3.0));
    let killed = Instant::now();
    std::mem::forget(lease); // dead: no release, no more extensions
    let began = follower_at.recv().expect("the follower leads");
    let failover = began.duration_since(killed).as_secs_f64() * 1e3;
    // The lease ends a TTL after its last extension was sent at the latest.
    let floor = (extended + ttl)
        .saturating_duration_since(killed)
        .as_secs_f64()
        * 1e3;
    (failover, floor)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let ttl = Duration::from_millis(args.next().and_then(|a| a.parse().ok()).unwrap_or(600));
    let dir = std::env::temp_dir().join(format!("failover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stores = [
        ("sqlite", format!("sqlite://{}", dir.join("f.db").display())),
        (
            "redis",
            url("LOCK_STORE_REDIS_URL", "redis://127.0.0.1:6379"),
        ),
        (
            "postgres",
            url(
                "LOCK_STORE_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
        ),
        (
            "mariadb",
            url("LOCK_STORE_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
        ),
    ];
    println!(
        "Failover of a leader election, {rounds} rounds per store, TTL {} ms",
        ttl.as_millis()
    );
    println!();
    println!("| store | after a kill: p50 / max ms | its floor (rest of the lease) p50 | above the floor p50 / max ms | after a resignation: p50 / max ms | one release p50 ms | resignation / release p50 |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (label, url) in stores {
        let ns = format!("failover_{}", std::process::id());
        let (leader, other) = match (Locks::open(&url, &ns), Locks::open(&url, &ns)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => {
                println!("| {label} | (store not reachable) | | | | | |");
                continue;
            }
        };
        let mut kills = Vec::new();
        let mut floors = Vec::new();
        let mut above = Vec::new();
        let mut resigns = Vec::new();
        let mut releases = Vec::new();
        std::thread::scope(|s| {
            for r in 0..rounds {
                // The follower's term begins, then it is shut down before the next round.
                let mut control = None;
                let phase = (r as f64 + 0.5) / rounds as f64;
                let (failover, floor) = round_kill(
                    &leader,
                    || {
                        let (c, at) = follower(s, &other, ttl);
                        control = Some(c);
                        at
                    },
                    ttl,
                    phase,
                );
                let control = control.expect("started");
                kills.push(failover);
                floors.push(floor);
                above.push(failover - floor);
                control.shut_down();
                while other.leader(NAME).ok().flatten().is_some() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                // A release on its own: the resignation's floor.
                let lease = leader
                    .acquire(NAME, "probe", ttl, Duration::from_secs(5))
                    .unwrap();
                let t = Instant::now();
                lease.release().unwrap();
                releases.push(t.elapsed().as_secs_f64() * 1e3);
                // Resign: the leader is an Election too.
                let (ltx, lrx) = mpsc::channel();
                let lead = Election::new(&leader, NAME, "leader", CampaignOptions::new(ttl.into()))
                    .unwrap();
                let lead_control = lead.control();
                s.spawn(move || {
                    lead.run(|term| {
                        let _ = ltx.send(());
                        while term.wait_stop(Duration::from_millis(20)).is_none() {}
                    })
                    .unwrap();
                });
                lrx.recv().unwrap();
                let (control, at) = follower(s, &other, ttl);
                // The follower is in line; the resignation comes at `phase` of its 50 ms look
                // (a store without notices: a fixed pause would land on one phase every round).
                std::thread::sleep(Duration::from_millis(100 + (50.0 * phase) as u64));
                let resigned = Instant::now();
                lead_control.shut_down();
                let began = at.recv().unwrap();
                resigns.push(began.duration_since(resigned).as_secs_f64() * 1e3);
                control.shut_down();
            }
        });
        for v in [
            &mut kills,
            &mut floors,
            &mut above,
            &mut resigns,
            &mut releases,
        ] {
            v.sort_by(f64::total_cmp);
        }
        let p50 = |v: &[f64]| percentile(v, 0.5);
        let max = |v: &[f64]| *v.last().unwrap();
        println!(
            "| {label} | {:.0} / {:.0} | {:.0} | {:.0} / {:.0} | {:.1} / {:.1} | {:.2} | {:.0}x |",
            p50(&kills),
            max(&kills),
            p50(&floors),
            p50(&above),
            max(&above),
            p50(&resigns),
            max(&resigns),
            p50(&releases),
            p50(&resigns) / p50(&releases)
        );
        if let Ok(mut store) = lock_store::store::open(&url, &ns, lock_store::store::DEFAULT_BOUND)
        {
            let _ = store.uninstall();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
