//! A batch gives the same answers as the same calls made one by one, and a malformed request
//! stops the batch without running anything after it.

use host_wasmtime::{Batch, LockComponent, SandboxLimits};
use lock_core::wire::Response;
use lock_core::Request;
use lock_core::{Duration, Fence, Instant};

#[test]
fn a_batch_answers_like_single_calls() {
    let component = LockComponent::embedded().unwrap();
    let limits = lock_core::Limits::default();
    let mut single = component
        .instantiate(&limits, 0, SandboxLimits::default())
        .unwrap();
    let mut batched = component
        .instantiate(&limits, 0, SandboxLimits::default())
        .unwrap();

    let mut batch = Batch::new();
    batch
        .try_acquire("job", "a", Duration(100), Instant(0))
        .try_acquire("job", "b", Duration(100), Instant(1))
        .acquire("job", "c", Duration(50), Instant(500), Instant(2))
        .extend("job", "a", Fence(1), Duration(200), Instant(3))
        .release("job", "b", Fence(1), Instant(4))
        .cancel_wait("job", "x", Instant(5))
        .handle_timeout(Instant(203))
        .release("job", "a", Fence(1), Instant(204))
        .try_acquire("ジョブ", "ワーカー", Duration(10), Instant(205))
        .try_acquire("", "a", Duration(10), Instant(206))
        .extend("nothing", "a", Fence(7), Duration(10), Instant(207));
    assert_eq!(batch.len(), 11);
    let responses = batched.batch(&batch).unwrap();

    let requests = lock_core::wire::decode_requests(batch.bytes(), batch.names());
    let expected: Vec<Response> = requests
        .map(|r: Result<Request<'_>, _>| single.handle(r.unwrap()).unwrap())
        .collect();
    assert_eq!(expected.len(), 11);
    assert_eq!(responses, expected);
    assert!(matches!(
        responses[1],
        Response::Acquire(Err(lock_core::LockError::Held {
            deadline: Instant(100)
        }))
    ));
    assert_eq!(
        batched.poll_events().unwrap(),
        single.poll_events().unwrap()
    );
    assert_eq!(
        batched.snapshot(Instant(300)).unwrap(),
        single.snapshot(Instant(300)).unwrap()
    );
}

#[test]
fn a_malformed_request_ends_the_batch_and_nothing_after_it_runs() {
    let component = LockComponent::embedded().unwrap();
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .unwrap();
    let mut batch = Batch::new();
    batch.try_acquire("k1", "a", Duration(10), Instant(0));
    let first_end = batch.bytes_mut().len();
    batch
        .try_acquire("é", "a", Duration(10), Instant(0))
        .try_acquire("k3", "a", Duration(10), Instant(0));
    // Cut 'é' in half: the second request's key length (after its op byte and `now`) says 1
    // byte, which ends inside the character.
    let key_len_at = first_end + 1 + 8;
    batch.bytes_mut()[key_len_at..key_len_at + 4].copy_from_slice(&1u32.to_le_bytes());
    let responses = table.batch(&batch).unwrap();
    assert_eq!(responses.len(), 2);
    assert!(matches!(responses[0], Response::Acquire(Ok(_))));
    assert_eq!(responses[1], Response::Malformed);
    assert_eq!(
        table.stats(Instant(0)).unwrap().live_leases,
        1,
        "k3 never ran"
    );

    // Truncated bytes and an unknown operation are refused the same way.
    for bad in [vec![0u8, 1, 2], vec![42u8; 20]] {
        let mut b = Batch::new();
        *b.bytes_mut() = bad;
        assert_eq!(table.batch(&b).unwrap(), vec![Response::Malformed]);
    }
    assert!(!table.is_poisoned());
}
