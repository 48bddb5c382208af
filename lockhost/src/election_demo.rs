//! The election part of `lockhost demo`: three plugins of one host elect one of themselves
//! (`host_wasmtime::election`), on the real clock. Each term's body writes, with its fence, to a
//! resource that keeps the highest fence it has seen; a resignation hands over at once, the
//! resigner's late write is refused by fence, and a leader that leaves hands over to the next in
//! line.

use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use host_wasmtime::election::{CampaignOptions, Control, Election, Term};
use host_wasmtime::LockHost;
use lock_core::Fence;

/// The election's name.
const NAME: &str = "indexer";
/// Each term's lease.
const TTL: Duration = Duration::from_millis(1_000);
/// The longest the story waits for one of its steps.
const STEP: Duration = Duration::from_secs(5);

/// A resource that takes a write only with the highest fence it has seen so far.
#[derive(Default)]
struct Fenced(Mutex<Fence>);

impl Fenced {
    /// Writes with `fence`: answers whether the resource took it.
    fn write(&self, fence: Fence) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let taken = fence >= *seen;
        if taken {
            *seen = fence;
        }
        taken
    }

    fn seen(&self) -> Fence {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shuts the campaigns down when dropped, so that a step that fails ends the story instead of
/// leaving the campaigns' threads running.
struct Leave(Vec<Control>);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.iter().for_each(Control::shut_down);
    }
}

/// Waits (at most [`STEP`]) until `f` answers something.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> Result<T, String> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > STEP {
            return Err(format!("the election demo waited {STEP:?} for {what}"));
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Plays the story on `host`, saying each step with `say`.
///
/// # Errors
/// A step that did not happen within 5 s, or a campaign that ended with an error.
pub fn run(host: &LockHost, say: &(dyn Fn(&str) + Sync)) -> Result<(), String> {
    let options = CampaignOptions::new(TTL.into());
    let plugins = ["plugin-a", "plugin-b", "plugin-c"]
        .map(|id| Election::new(host, NAME, id, options).map(|e| e.metadata(id)));
    let [a, b, c] = plugins.map(|p| p.map_err(|e| e.to_string()));
    let (a, b, c) = (a?, b?, c?);
    let resource = Fenced::default();
    let leader = || host.leader(NAME).ok().flatten();
    let in_line = || -> Vec<String> {
        let info = host.inspect(NAME).ok().flatten();
        info.map(|i| i.waiters.into_iter().map(|w| w.owner).collect())
            .unwrap_or_default()
    };
    say(&format!(
        "election \"{NAME}\": three plugins campaign (TTL {} ms); each leader writes to a resource that takes only the highest fence it has seen",
        TTL.as_millis()
    ));
    let body = |who: &'static str| {
        let (resource, say) = (&resource, say);
        move |term: &Term| {
            let taken = resource.write(term.fence());
            say(&format!(
                "> {who} leads (fence {}); its write is {}",
                term.fence(),
                if taken { "taken" } else { "refused" }
            ));
            let reason = loop {
                if let Some(reason) = term.wait_stop(Duration::from_millis(50)) {
                    break reason;
                }
                resource.write(term.fence());
            };
            say(&format!("  {who}'s term stops: {}", reason.name()));
        }
    };
    // Waits until `who` leads (its leader record), or waits in line.
    let leads = |who: &str| {
        wait_for(&format!("{who} to lead"), || {
            leader().filter(|l| l.candidate == who)
        })
    };
    let waits = |who: &str| {
        wait_for(&format!("{who} in line"), || {
            in_line().iter().any(|w| w == who).then_some(())
        })
    };
    thread::scope(|s| {
        let _leave = Leave(vec![a.control(), b.control(), c.control()]);
        let mut runs = vec![s.spawn(|| a.run(body("plugin-a")))];
        let first = leads("plugin-a")?;
        for (e, who) in [(&b, "plugin-b"), (&c, "plugin-c")] {
            runs.push(s.spawn(move || e.run(body(who))));
            waits(who)?;
        }
        say(&format!("  in line behind it: {}", in_line().join(", ")));
        thread::sleep(TTL + TTL / 2);
        let still = leader().filter(|l| l.fence == first.fence);
        say(&format!(
            "  {} ms later plugin-a still leads with fence {}: its lease is extended every third of its TTL",
            (TTL + TTL / 2).as_millis(),
            still.map_or("(none)".into(), |l| l.fence.to_string())
        ));
        let resigned = Instant::now();
        a.control().resign();
        let second = leads("plugin-b")?;
        say(&format!(
            "  plugin-a resigned: plugin-b leads at once with fence {} ({:.1} ms later, no TTL waited out)",
            second.fence,
            resigned.elapsed().as_secs_f64() * 1e3
        ));
        wait_for("plugin-b's write", || {
            (resource.seen() >= second.fence).then_some(())
        })?;
        let late = resource.write(first.fence);
        say(&format!(
            "  plugin-a's late write with fence {}: {} (the resource has seen fence {})",
            first.fence,
            if late { "TAKEN" } else { "refused" },
            resource.seen()
        ));
        waits("plugin-a")?;
        say(&format!(
            "  plugin-a campaigns on, in line again: {}",
            in_line().join(", ")
        ));
        b.control().shut_down();
        let third = leads("plugin-c")?;
        // Handed the key is not leading yet: its term starts once its campaign hears the grant
        // (a shut-down before that starts no term). Its body's first write says it began.
        wait_for("plugin-c's write", || {
            (resource.seen() >= third.fence).then_some(())
        })?;
        say(&format!(
            "  plugin-b left: plugin-c, next in line, leads with fence {}",
            third.fence
        ));
        a.control().shut_down();
        c.control().shut_down();
        let mut terms = Vec::new();
        for run in runs {
            let led = run
                .join()
                .map_err(|_| "a plugin's body panicked".to_owned())?;
            terms.push(led.map_err(|e| e.to_string())?);
        }
        say(&format!(
            "  all three left: {} (terms led: {})",
            leader().map_or("no leader".into(), |l| format!(
                "still led by {}",
                l.candidate
            )),
            terms
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Ok(())
    })
}
