//! A batch gives the same answers as the same calls made one by one, and a malformed request
//! stops the batch without running anything after it.

use host_wasmtime::{Batch, LockComponent, SandboxLimits};
use lock_core::wire::Response;
use lock_core::Request;

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
        .try_acquire("job", "a", 100, 0)
        .try_acquire("job", "b", 100, 1)
        .acquire("job", "c", 50, 500, 2)
        .extend("job", "a", 1, 200, 3)
        .release("job", "b", 1, 4)
        .cancel_wait("job", "x", 5)
        .handle_timeout(203)
        .release("job", "a", 1, 204)
        .try_acquire("ジョブ", "ワーカー", 10, 205)
        .try_acquire("", "a", 10, 206)
        .extend("nothing", "a", 7, 10, 207);
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
        Response::Acquire(Err(lock_core::LockError::Held { deadline: 100 }))
    ));
    assert_eq!(
        batched.poll_events().unwrap(),
        single.poll_events().unwrap()
    );
    assert_eq!(
        batched.snapshot(300).unwrap(),
        single.snapshot(300).unwrap()
    );
}

#[test]
fn a_malformed_request_ends_the_batch_and_nothing_after_it_runs() {
    let component = LockComponent::embedded().unwrap();
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .unwrap();
    let mut batch = Batch::new();
    batch.try_acquire("k1", "a", 10, 0);
    let first_end = batch.bytes_mut().len();
    batch
        .try_acquire("é", "a", 10, 0)
        .try_acquire("k3", "a", 10, 0);
    // Cut 'é' in half: the second request's key length (after its op byte and `now`) says 1
    // byte, which ends inside the character.
    let key_len_at = first_end + 1 + 8;
    batch.bytes_mut()[key_len_at..key_len_at + 4].copy_from_slice(&1u32.to_le_bytes());
    let responses = table.batch(&batch).unwrap();
    assert_eq!(responses.len(), 2);
    assert!(matches!(responses[0], Response::Acquire(Ok(_))));
    assert_eq!(responses[1], Response::Malformed);
    assert_eq!(table.stats(0).unwrap().live_leases, 1, "k3 never ran");

    // Truncated bytes and an unknown operation are refused the same way.
    for bad in [vec![0u8, 1, 2], vec![42u8; 20]] {
        let mut b = Batch::new();
        *b.bytes_mut() = bad;
        assert_eq!(table.batch(&b).unwrap(), vec![Response::Malformed]);
    }
    assert!(!table.is_poisoned());
}
