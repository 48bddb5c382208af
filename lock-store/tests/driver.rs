//! The sans-IO driver (`lock_store::driver`, what the npm package's store client runs) against
//! an in-memory store: the renewals of one key's waiters decided together are one
//! compare-and-set for all, and answer each waiter as its own renewal would.
use std::time::Duration;

use lock_store::driver::{Client, LocalInstant, Next, Op, Outcome, Waiting, Wanted};
use lock_store::store::{MemoryStore, Store, TimeSource};
use lock_store::{Instant, Limits, StoreError};

/// Runs `call` through `store` to its end (the IO the driver asks for, at local instant `t`);
/// answers its outcomes and how many compare-and-sets it sent.
fn run(
    client: &mut Client,
    store: &mut MemoryStore,
    mut call: lock_store::driver::Call,
    t: LocalInstant,
) -> (Result<Vec<Outcome>, StoreError>, usize) {
    let mut writes = 0;
    let key = call.key().to_owned();
    loop {
        let next = client.poll(&mut call, t);
        let handled = match next {
            Ok(Next::Read) => {
                let read = store.read(&key);
                client.handle_read(&mut call, read, t, t)
            }
            Ok(Next::Write(write)) => {
                writes += 1;
                let written = store.write(&key, &write);
                client.handle_written(&mut call, written, t)
            }
            Ok(Next::Pause(_)) => Ok(()),
            Ok(Next::Done) | Err(_) => break,
        };
        if handled.is_err() {
            break;
        }
    }
    (client.finish_each(call), writes)
}

/// A waiter's next call, as the driver's `Waiting` asks it.
fn next_op(waiting: &mut Waiting) -> Op {
    match waiting.want() {
        Wanted::Ask(op) | Wanted::Renew(op) => op,
        other => panic!("expected a call, got {other:?}"),
    }
}

/// Drives `waiting` (its naps skipped, its looks run) until it wants to renew its place: that
/// renewal.
fn due_renewal(
    waiting: &mut Waiting,
    client: &mut Client,
    store: &mut MemoryStore,
    t: LocalInstant,
) -> Op {
    loop {
        match waiting.want() {
            Wanted::Renew(op) => return op,
            Wanted::Nap(_) | Wanted::Pause(_) => {}
            Wanted::Look => {
                let call = client.call("job", Op::Inspect, Instant::ZERO, t);
                let (ended, _) = run(client, store, call, t);
                let outcome = ended.unwrap().remove(0);
                assert_eq!(waiting.answered(Ok(outcome), t).unwrap(), None);
            }
            Wanted::Ask(op) | Wanted::Leave(op) => panic!("a waiter in line asked {op:?}"),
        }
    }
}

#[test]
fn renewals_decided_together_are_one_write_and_answer_each_waiter() {
    let mut store = MemoryStore::new("together").unwrap();
    store.install().unwrap();
    let limits = Limits::default();
    let mut client = Client::new("memory", limits, TimeSource::Store, 7).unwrap();
    let t = LocalInstant::from_nanos(1_000_000);
    let ttl = Duration::from_secs(60);
    let hold = Op::TryAcquire {
        owner: "holder".into(),
        ttl: lock_store::driver::Duration(60_000),
    };
    let call = client.call("job", hold, Instant::ZERO, t);
    let (held, _) = run(&mut client, &mut store, call, t);
    assert_eq!(held.unwrap().len(), 1);
    // Five waiters queue, one call each.
    let mut waiters: Vec<Waiting> = (0..5)
        .map(|i| {
            Waiting::new(
                "job",
                &format!("w{i}"),
                ttl,
                Duration::from_secs(600),
                Duration::from_millis(50),
            )
        })
        .collect();
    for waiting in &mut waiters {
        let op = next_op(waiting);
        let call = client.call("job", op, Instant::ZERO, t);
        let (ended, _) = run(&mut client, &mut store, call, t);
        let outcome = ended.unwrap().remove(0);
        assert_eq!(waiting.answered(Ok(outcome), t).unwrap(), None);
        assert!(waiting.in_line());
    }
    // Later, every place is due for renewal: one call for the five.
    let later = LocalInstant::from_nanos(1_000_000 + 1_500_000_000);
    std::thread::sleep(Duration::from_millis(1_500)); // the memory store's clock is real
    let ops: Vec<Op> = waiters
        .iter_mut()
        .map(|w| due_renewal(w, &mut client, &mut store, later))
        .collect();
    let call = client.call_together("job", ops, later).unwrap();
    let (ended, writes) = run(&mut client, &mut store, call, later);
    let outcomes = ended.unwrap();
    assert_eq!(writes, 1, "one compare-and-set for every renewal");
    assert_eq!(outcomes.len(), 5, "each renewal answered");
    for (waiting, outcome) in waiters.iter_mut().zip(outcomes) {
        assert_eq!(waiting.answered(Ok(outcome), later).unwrap(), None);
        assert!(waiting.in_line());
    }
    // The store's record kept each place, in order.
    let mut engine =
        lock_store::store::Engine::new(store.clone(), Limits::default(), TimeSource::Store)
            .unwrap();
    let info = engine
        .inspect("job", Instant::ZERO)
        .unwrap()
        .reply
        .unwrap()
        .unwrap();
    let owners: Vec<&str> = info.waiters.iter().map(|w| w.owner.as_str()).collect();
    assert_eq!(owners, ["w0", "w1", "w2", "w3", "w4"]);
    // An inspection cannot be batched, nor an empty batch.
    assert!(client
        .call_together("job", vec![Op::Inspect], later)
        .is_none());
    assert!(client.call_together("job", Vec::new(), later).is_none());
}
