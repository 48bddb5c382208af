//! The opt-in `WAIT` after each write (`wait_replicas=N[&wait_timeout_ms=T]` in the URL): a
//! write is answered only once `N` replicas acknowledged it, so that a failover to one of them
//! keeps it. Redis ignores `WAIT` inside a script, so the client sends it right after the
//! compare-and-set, in the same round trip. A write made that fewer replicas acknowledged in
//! time is answered [`StoreError::Unreplicated`]: it happened on the primary and may not
//! survive a failover; the client protocol decides what that means (a grant is given back, an
//! extension is tried again). A write that was not made (a conflict) is answered as it is.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::store::{StoreError, Written};

/// The URL's parameters, which the drivers do not know.
const PARAMS: [&str; 2] = ["wait_replicas", "wait_timeout_ms"];

/// The timeout when the URL gives none: a second, or half the calls' bound if that is shorter.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// How many replicas must acknowledge each write, and for how long the primary waits for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Replicas {
    /// `wait_replicas`: at least 1.
    pub(crate) count: u32,
    /// `wait_timeout_ms`: at least 1 ms, and shorter than the calls' bound (a `WAIT` that
    /// outlasts it would be a lost connection instead of an answer).
    pub(crate) timeout_ms: u64,
}

impl Replicas {
    /// `url` without the parameters of this module, and what they ask (`None` without
    /// `wait_replicas`); `bound` is the calls' bound (errors name `url` without its password).
    ///
    /// # Errors
    /// [`StoreError::Url`]: a value that is not a number, out of range, given twice, or a
    /// timeout without a count.
    pub(crate) fn take(
        url: &str,
        bound: Duration,
    ) -> Result<(String, Option<Replicas>), StoreError> {
        let (rest, params) = crate::tls::take_params(url, &PARAMS);
        let bad = |reason: String| StoreError::Url {
            url: crate::url::without_password(url),
            reason,
        };
        let mut values: [Option<&str>; 2] = [None, None];
        for (name, value) in &params {
            let i = usize::from(name == PARAMS[1]);
            if values[i].replace(value).is_some() {
                return Err(bad(format!("{name} is given twice")));
            }
        }
        let [count, timeout] = values;
        let Some(count) = count else {
            return match timeout {
                Some(_) => Err(bad("wait_timeout_ms needs wait_replicas=N".into())),
                None => Ok((rest, None)),
            };
        };
        let count = match count.parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(bad(format!(
                    "wait_replicas={count}: give how many replicas must acknowledge each write (1 or more)"
                )))
            }
        };
        let longest = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
        let timeout_ms = match timeout {
            None => {
                let default = u64::try_from(DEFAULT_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
                default.min(longest / 2).max(1)
            }
            Some(t) => match t.parse::<u64>() {
                Ok(ms) if ms >= 1 && ms < longest => ms,
                _ => {
                    return Err(bad(format!(
                        "wait_timeout_ms={t}: give milliseconds, at least 1 and less than the calls' bound ({longest} ms)"
                    )))
                }
            },
        };
        Ok((rest, Some(Replicas { count, timeout_ms })))
    }

    /// `WAIT count timeout`.
    pub(crate) fn command(&self) -> Cmd {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(self.count).arg(self.timeout_ms);
        cmd
    }

    /// The answer to a write given `written` and the reply to the `WAIT` sent after it: a write
    /// made that fewer than `count` replicas acknowledged is [`StoreError::Unreplicated`].
    pub(crate) fn verdict(
        &self,
        written: Written,
        acked: &Value,
        store: &str,
    ) -> Result<Written, StoreError> {
        if !matches!(written, Written::Done { .. }) {
            return Ok(written);
        }
        let reason = match acked {
            Value::Int(n) if *n >= i64::from(self.count) => return Ok(written),
            Value::Int(n) => format!(
                "{n} of the {} replicas it waits for acknowledged it within {} ms (wait_replicas)",
                self.count, self.timeout_ms
            ),
            other => format!("its WAIT failed ({other:?})"),
        };
        Err(StoreError::Unreplicated {
            store: store.to_owned(),
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::Fence;

    const BOUND: Duration = Duration::from_secs(5);

    fn take(url: &str) -> Result<(String, Option<Replicas>), StoreError> {
        Replicas::take(url, BOUND)
    }

    #[test]
    fn the_parameters_are_taken_from_the_url() {
        assert_eq!(
            take("redis://h:1/0").unwrap(),
            ("redis://h:1/0".into(), None)
        );
        let (rest, replicas) = take("redis://h:1/0?wait_replicas=2&protocol=resp2").unwrap();
        assert_eq!(rest, "redis://h:1/0?protocol=resp2");
        assert_eq!(
            replicas,
            Some(Replicas {
                count: 2,
                timeout_ms: 1000
            })
        );
        let (rest, replicas) =
            take("redis+sentinel://a:1,b:2/locks?wait_timeout_ms=250&wait_replicas=1").unwrap();
        assert_eq!(rest, "redis+sentinel://a:1,b:2/locks");
        assert_eq!(replicas.unwrap().timeout_ms, 250);
        let short = Replicas::take("redis://h?wait_replicas=1", Duration::from_millis(600));
        assert_eq!(short.unwrap().1.unwrap().timeout_ms, 300);
    }

    #[test]
    fn bad_values_are_url_errors() {
        for url in [
            "redis://h?wait_replicas=0",
            "redis://h?wait_replicas=-1",
            "redis://h?wait_replicas=one",
            "redis://h?wait_replicas=",
            "redis://h?wait_replicas=1&wait_replicas=2",
            "redis://h?wait_timeout_ms=100",
            "redis://h?wait_replicas=1&wait_timeout_ms=0",
            "redis://h?wait_replicas=1&wait_timeout_ms=5000",
            "redis://h?wait_replicas=1&wait_timeout_ms=1.5",
        ] {
            let e = take(url).unwrap_err();
            assert!(matches!(e, StoreError::Url { .. }), "{url}: {e}");
        }
    }

    #[test]
    fn a_write_made_is_unreplicated_unless_enough_replicas_acknowledged_it() {
        let replicas = Replicas {
            count: 2,
            timeout_ms: 100,
        };
        let done = || Written::Done {
            fences: vec![Fence(7)],
        };
        assert!(replicas.verdict(done(), &Value::Int(2), "s").is_ok());
        assert!(replicas.verdict(done(), &Value::Int(3), "s").is_ok());
        for short in [Value::Int(1), Value::Int(0), Value::Nil] {
            let e = replicas.verdict(done(), &short, "s").unwrap_err();
            assert!(
                matches!(e, StoreError::Unreplicated { .. }),
                "{short:?}: {e}"
            );
        }
        let conflict = Written::Conflict(crate::store::Read {
            record: None,
            now: lock_core::Instant(5),
        });
        assert!(matches!(
            replicas.verdict(conflict, &Value::Int(0), "s"),
            Ok(Written::Conflict(_))
        ));
    }
}
