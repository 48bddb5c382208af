//! A fault-injecting TCP proxy of the tests' own, between clients and a real server: it passes
//! bytes both ways until told to fail in one of the gray ways a network does.
//!
//! - [`Fault::Blackhole`]: nothing is forwarded either way and no connection is closed (a path
//!   that goes silent: a dead switch, a paused VM, a firewall that drops).
//! - [`Fault::StallReplies`]: requests reach the server, its answers are held back (a one-way
//!   stall: the write happens, the client never hears it).
//! - [`Fault::Delay`]: every chunk waits this long in each direction.
//! - [`Proxy::reset`]: every open connection is closed now (new ones pass).
//!
//! [`Proxy::recording`] also keeps every byte each client sent, per connection, for tests that
//! read what went over the wire.
//!
//! Held bytes are delivered, in order, once the fault is lifted (as TCP would after an outage
//! shorter than its retries).
#![allow(dead_code)] // each test binary uses part of it

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does to the traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Passes everything.
    None,
    /// Forwards nothing either way; connections stay open.
    Blackhole,
    /// Forwards requests to the server, holds its answers back.
    StallReplies,
    /// Delays every chunk by this much, both ways.
    Delay(Duration),
}

/// The bytes one connection's client sent.
type Recorded = Arc<Mutex<Vec<u8>>>;

#[derive(Default)]
struct Shared {
    fault: Mutex<Option<Fault>>,
    /// Every connection's two sockets, to reset them.
    open: Mutex<Vec<(TcpStream, TcpStream)>>,
    accepted: AtomicUsize,
    /// What each connection's client sent, if recording.
    recorded: Option<Mutex<Vec<Recorded>>>,
}

/// A proxy listening on 127.0.0.1 (see the module's documentation).
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
    /// The port it listens on.
    pub port: u16,
}

impl Proxy {
    /// A proxy to `target` (`host:port`) that passes everything until told otherwise.
    pub fn to(target: &str) -> Proxy {
        Proxy::start(target, Shared::default())
    }

    /// A proxy to the server of `url` that keeps what every client sends (see [`Proxy::sent`]).
    pub fn recording(url: &str) -> Proxy {
        Proxy::start(
            &host_port(url),
            Shared {
                recorded: Some(Mutex::default()),
                ..Shared::default()
            },
        )
    }

    /// The bytes each connection's client sent so far, one buffer per connection, in the
    /// order they were accepted (empty unless made by [`Proxy::recording`]).
    pub fn sent(&self) -> Vec<Vec<u8>> {
        self.shared.recorded.as_ref().map_or_else(Vec::new, |all| {
            all.lock()
                .unwrap()
                .iter()
                .map(|one| one.lock().unwrap().clone())
                .collect()
        })
    }

    fn start(target: &str, shared: Shared) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(shared);
        *shared.fault.lock().unwrap() = Some(Fault::None);
        let target = target.to_owned();
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                accepting.accepted.fetch_add(1, Ordering::SeqCst);
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                accepting
                    .open
                    .lock()
                    .unwrap()
                    .push((client.try_clone().unwrap(), server.try_clone().unwrap()));
                let record = accepting.recorded.as_ref().map(|all| {
                    let one = Arc::new(Mutex::new(Vec::new()));
                    all.lock().unwrap().push(Arc::clone(&one));
                    one
                });
                let up = (client.try_clone().unwrap(), server.try_clone().unwrap());
                for (from, to, replies) in [(up.0, up.1, false), (server, client, true)] {
                    let shared = Arc::clone(&accepting);
                    let record = if replies { None } else { record.clone() };
                    std::thread::spawn(move || pump(&shared, from, to, replies, record));
                }
            }
        });
        Proxy { shared, port }
    }

    /// A proxy to the server of `url`.
    pub fn for_url(url: &str) -> Proxy {
        Proxy::to(&host_port(url))
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> String {
        url.replacen(&host_port(url), &format!("127.0.0.1:{}", self.port), 1)
    }

    /// From now on, `fault`.
    pub fn set(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap() = Some(fault);
    }

    /// Closes every connection open now (both sides); later ones pass.
    pub fn reset(&self) {
        for (client, server) in self.shared.open.lock().unwrap().drain(..) {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    fn fault(&self) -> Fault {
        current(&self.shared)
    }
}

fn current(shared: &Shared) -> Fault {
    shared.fault.lock().unwrap().unwrap_or(Fault::None)
}

/// Whether `fault` holds back traffic going this way (`replies`: server to client).
fn holds(fault: Fault, replies: bool) -> bool {
    match fault {
        Fault::Blackhole => true,
        Fault::StallReplies => replies,
        Fault::None | Fault::Delay(_) => false,
    }
}

fn pump(
    shared: &Shared,
    mut from: TcpStream,
    mut to: TcpStream,
    replies: bool,
    record: Option<Recorded>,
) {
    let mut buf = [0u8; 16384];
    loop {
        // Held before reading too, so that a blackholed request is not even read (its sender
        // sees a full path, as with a dead link).
        while holds(current(shared), replies) {
            std::thread::sleep(Duration::from_millis(2));
        }
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        if let Some(record) = &record {
            record.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        loop {
            match current(shared) {
                f if holds(f, replies) => std::thread::sleep(Duration::from_millis(2)),
                Fault::Delay(d) => {
                    std::thread::sleep(d);
                    break;
                }
                _ => break,
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Opens namespace `ns` on the server of `real` through a new proxy, with calls bounded at
/// `bound` (installed directly first: through the proxy, opening only checks it).
pub fn locks_through(real: &str, ns: &str, bound: Duration) -> (lock_store::Locks, Proxy) {
    drop(lock_store::store::open(real, ns, lock_store::store::DEFAULT_BOUND).unwrap());
    let proxy = Proxy::for_url(real);
    let store = lock_store::store::open(&proxy.url(real), ns, bound).unwrap();
    (lock_store::Locks::new(store), proxy)
}

/// `host:port` of a store URL.
pub fn host_port(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let authority = rest.split('/').next().unwrap();
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .to_owned()
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "proxy on {} ({:?})", self.port, self.fault())
    }
}
