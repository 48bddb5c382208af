//! A batch gives the same answers as the same calls made one by one, and refuses bad ranges.

use host_wasmtime::types::Response;
use host_wasmtime::{Batch, LockComponent, SandboxLimits};

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
        .try_acquire("ジョブ", "ワーカー", 10, 205);
    let responses = batched.batch(&batch).unwrap();

    let expected = vec![
        Response::Acquire(single.try_acquire("job", "a", 100, 0).unwrap()),
        Response::Acquire(single.try_acquire("job", "b", 100, 1).unwrap()),
        Response::Acquire(single.acquire("job", "c", 50, 500, 2).unwrap()),
        Response::Extend(single.extend("job", "a", 1, 200, 3).unwrap()),
        Response::Done(single.release("job", "b", 1, 4).unwrap()),
        Response::Done(single.cancel_wait("job", "x", 5).unwrap()),
        {
            single.handle_timeout(203).unwrap();
            Response::Timeout
        },
        Response::Done(single.release("job", "a", 1, 204).unwrap()),
        Response::Acquire(single.try_acquire("ジョブ", "ワーカー", 10, 205).unwrap()),
    ];
    assert_eq!(responses, expected);
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
fn ranges_outside_the_text_or_inside_a_character_are_refused() {
    let component = LockComponent::embedded().unwrap();
    let mut table = component
        .instantiate(&lock_core::Limits::default(), 0, SandboxLimits::default())
        .unwrap();
    let mut batch = Batch::new();
    batch
        .try_acquire("é", "a", 10, 0)
        .try_acquire("k", "a", 10, 0)
        .try_acquire("k2", "a", 10, 0);
    batch.requests_mut()[0].key_len = 1; // half of 'é'
    batch.requests_mut()[1].owner_start = 10_000; // outside the text
    batch.requests_mut()[2].key_len = u32::MAX; // overflowing
    let responses = table.batch(&batch).unwrap();
    assert_eq!(
        responses,
        vec![Response::BadRange, Response::BadRange, Response::BadRange]
    );
    assert_eq!(table.stats(0).unwrap().live_leases, 0);
}
