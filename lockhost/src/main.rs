//! `lockhost`: the lock component in wasmtime, from the command line.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use host_wasmtime::{Error, LockComponent, LockHost};
use lock_conformance::run_paths;
use lockhost::{bench, election_demo, vectors};

const USAGE: &str = "lockhost: expiring locks as a WebAssembly component, run by wasmtime

usage:
  lockhost vectors PATH...   run conformance vector files (or directories) against the component
  lockhost demo              a scripted scenario on the real clock, printed as a timeline
  lockhost bench [PAIRS]     the same workload native, through the component, batched, beside the
                             boundary floor, and through the host API with 1/2/8 threads
  lockhost help [COMMAND]    this text, or one command's

exit status: 0 success, 1 a vector failed, 2 bad usage or a file/component could not be loaded";

const VECTORS_HELP: &str = "usage: lockhost vectors PATH...

Runs every scenario of the given vector files (JSON, see tests/vectors/README.md) against the
embedded lock component, each on a fresh instance. A PATH may be a directory of *.json files.
Failures read `file / scenario / step N: expected X, got Y`. Exit 1 if any step fails.";

const DEMO_HELP: &str = "usage: lockhost demo

Plays a short story on the real clock (about 2 seconds) and prints its timeline: contention, a
blocked acquire served by FIFO hand-off, a wait that times out, a holder that freezes and loses
its lock (lost-lock callback), keep-alive, and a stale fencing token refused. Then (about 2 more
seconds) three plugins elect a leader: each term's write carries its fence, a resignation hands
over at once, the resigner's late write is refused by fence, a leader that leaves hands over to
the next in line.";

const BENCH_HELP: &str = "usage: lockhost bench [PAIRS]

Measures PAIRS (default 200000) acquire+release pairs and contended acquires natively and through
the component, a batch call of 64 requests, the boundary floor (an exported call with the same
argument shapes that does nothing), and the host API with 1, 2 and 8 threads; prints ns/op, ops/s
and ratios. Then start-up: compiling the component, loading it from a warm compiled-component
cache, and building a LockHost (in a new process, and over a component the process holds).
Build in release mode (cargo run --release) for meaningful numbers.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let wants_help = args.iter().any(|a| a == "-h" || a == "--help");
    match args.first().map(String::as_str) {
        Some("vectors") if wants_help => help(VECTORS_HELP),
        Some("demo") if wants_help => help(DEMO_HELP),
        Some("bench") if wants_help => help(BENCH_HELP),
        Some("vectors") if args.len() > 1 => vectors(&args[1..]),
        Some("vectors") => usage_error("vectors needs at least one PATH", VECTORS_HELP),
        Some("demo") if args.len() == 1 => demo(),
        Some("bench") => match args.get(1).map(|n| n.parse::<u64>()) {
            None => bench(200_000),
            Some(Ok(n)) if n > 0 && args.len() == 2 => bench(n),
            _ => usage_error("PAIRS must be one positive integer", BENCH_HELP),
        },
        Some("help") => help(match args.get(1).map(String::as_str) {
            Some("vectors") => VECTORS_HELP,
            Some("demo") => DEMO_HELP,
            Some("bench") => BENCH_HELP,
            _ => USAGE,
        }),
        None | Some("-h" | "--help") => help(USAGE),
        Some(other) => usage_error(&format!("unknown command '{other}'"), USAGE),
    }
}

fn help(text: &str) -> ExitCode {
    println!("{text}");
    ExitCode::SUCCESS
}

fn usage_error(message: &str, text: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{text}");
    ExitCode::from(2)
}

fn vectors(paths: &[String]) -> ExitCode {
    let component = match LockComponent::embedded() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut driver = vectors::component_driver(component);
    ExitCode::from(run_paths(
        &mut driver,
        paths,
        " (through the wasm component)",
    ))
}

fn bench(pairs: u64) -> ExitCode {
    if cfg!(debug_assertions) {
        eprintln!("note: this is a debug build; run `cargo run --release -p lockhost -- bench` for real numbers\n");
    }
    let results = bench::run(pairs);
    bench::report(&results);
    println!();
    bench::report_startup(&bench::startup());
    ExitCode::SUCCESS
}

/// Prints timeline lines with the elapsed real time.
#[derive(Clone)]
struct Timeline(Arc<Instant>, Arc<Mutex<()>>);

impl Timeline {
    fn say(&self, text: &str) {
        let _one_line_at_a_time = self.1.lock();
        println!("{:>6} ms  {text}", self.0.elapsed().as_millis());
    }
}

fn demo() -> ExitCode {
    let played = run_demo()
        .map_err(|e| e.to_string())
        .and_then(|(host, log)| election_demo::run(&host, &|text| log.say(text)));
    match played {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The lock story; answers its host and timeline for the election that follows.
fn run_demo() -> Result<(LockHost, Timeline), Error> {
    const KEY: &str = "nightly-report";
    let ms = Duration::from_millis;
    let host = LockHost::new()?;
    let log = Timeline(Arc::new(Instant::now()), Arc::new(Mutex::new(())));
    println!("lockhost demo: one lock component in wasmtime, real clock, key '{KEY}'\n");

    let a = host.try_acquire(KEY, "worker-a", ms(500))?;
    log.say(&format!(
        "worker-a acquired (fence {}, TTL 500 ms)",
        a.fence()
    ));
    let l = log.clone();
    a.on_lost(move |lost| {
        l.say(&format!(
            "! worker-a LOST the lock (fence {}): it froze past its deadline",
            lost.fence
        ))
    });
    match host.try_acquire(KEY, "worker-b", ms(400)) {
        Err(e) => log.say(&format!("worker-b try-acquire refused: {e}")),
        Ok(_) => log.say("worker-b unexpectedly got the lock"),
    }

    let (h, l) = (host.clone(), log.clone());
    let b = thread::spawn(move || -> Result<(), Error> {
        l.say("worker-b waits up to 2 s (blocking acquire)");
        let lease = h.acquire(KEY, "worker-b", ms(400), ms(2_000))?;
        l.say(&format!(
            "> worker-b was handed the lock (fence {}); keep-alive on",
            lease.fence()
        ));
        lease.keep_alive();
        thread::sleep(ms(900));
        l.say(&format!("worker-b still holds it past its first deadline (deadline now {} ms on the table clock)", lease.deadline()));
        lease.release()?;
        l.say("worker-b released");
        Ok(())
    });
    thread::sleep(ms(50));
    let (h, l) = (host.clone(), log.clone());
    let c = thread::spawn(move || {
        l.say("worker-c waits up to 200 ms");
        match h.acquire(KEY, "worker-c", ms(400), ms(200)) {
            Err(e) => l.say(&format!("- worker-c: {e}")),
            Ok(_) => l.say("worker-c unexpectedly got the lock"),
        }
    });
    log.say("worker-a freezes (no release, no keep-alive)...");
    c.join().ok();
    b.join().unwrap_or(Ok(()))?;
    match a.release() {
        Err(e) => log.say(&format!("worker-a wakes up and releases: {e}")),
        Ok(()) => log.say("worker-a released"),
    }
    let s = host.stats()?;
    println!(
        "\nstats: {} acquired, {} handed off, {} released, {} extended, {} expired, {} wait timeouts, {} rejected\n",
        s.acquired, s.handed_off, s.released, s.extended, s.expired, s.wait_timed_out, s.rejected
    );
    Ok((host, log))
}
