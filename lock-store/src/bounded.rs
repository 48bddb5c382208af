//! One store call on a native async connection, bounded: what the Redis and PostgreSQL async
//! stores share. A call with no answer in time, or whose caller gives it up (drops the future)
//! before its answer, may leave its connection out of step (an answer still due on it): the
//! store drops that connection.

use std::future::Future;
use std::time::Duration;

/// Runs `abandon` when dropped before [`Unanswered::answered`].
struct Unanswered<F: FnOnce()> {
    abandon: Option<F>,
}

impl<F: FnOnce()> Drop for Unanswered<F> {
    fn drop(&mut self) {
        if let Some(abandon) = self.abandon.take() {
            abandon();
        }
    }
}

/// `call`'s answer within `bound`, or `None` when none came in time (then `drop_connection`
/// runs, as it does if the caller drops this future before the answer).
pub(crate) async fn within<T>(
    bound: Duration,
    call: impl Future<Output = T>,
    drop_connection: impl FnOnce(),
) -> Option<T> {
    let mut guard = Unanswered {
        abandon: Some(drop_connection),
    };
    let answer = tokio::time::timeout(bound, call).await.ok();
    if answer.is_some() {
        guard.abandon = None;
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::within;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn drops_the_connection_when_unanswered_in_time_or_given_up() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let dropped = AtomicUsize::new(0);
        let drop_it = || {
            dropped.fetch_add(1, Ordering::SeqCst);
        };
        runtime.block_on(async {
            // Answered in time: kept.
            assert_eq!(
                within(Duration::from_secs(5), async { 7 }, drop_it).await,
                Some(7)
            );
            assert_eq!(dropped.load(Ordering::SeqCst), 0);
            // No answer in time: dropped.
            let silent = std::future::pending::<()>();
            assert_eq!(
                within(Duration::from_millis(10), silent, drop_it).await,
                None
            );
            assert_eq!(dropped.load(Ordering::SeqCst), 1);
            // Given up by its caller before the answer: dropped.
            let given_up = within(
                Duration::from_secs(5),
                std::future::pending::<()>(),
                drop_it,
            );
            let _ = tokio::time::timeout(Duration::from_millis(10), given_up).await;
            assert_eq!(dropped.load(Ordering::SeqCst), 2);
        });
    }
}
