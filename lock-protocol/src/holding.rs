//! What a holder decides about its lease, sans IO: the ambiguous-release rule, what a release's
//! answer means (released, and when; or lost, and what the release answers), and what an
//! extension's answer means. Every face's lease asks these (the blocking and tokio `Lease`
//! through `lock-store`'s `held.rs`, the npm `StoreLease` through the engine's answers), so that
//! they answer one event alike ("Answers per face" in docs/lock-store.md). Which refusals end a
//! lease is `lock-core`'s ([`LockError::lease_loss`]), shared with the in-process hosts.

use lock_core::{Grant, Instant, LockError, ReleaseOutcome, Response};

/// Whether a release's refusal means that the release took effect ("An ambiguous release" in
/// docs/stores.md): a `not-held` or `not-owner` decided while `unsure` (this call's write lost
/// its answer and the record read after it had been written again, or an earlier attempt of the
/// same lease failed with a store error) and while the store's clock (`now`) is before the
/// lease's `deadline`. Nothing but its owner's release ends a lease before its deadline, so the
/// release was this one.
#[must_use]
pub fn release_took_effect(
    reply: &Response,
    unsure: bool,
    now: Instant,
    deadline: Instant,
) -> bool {
    unsure
        && now < deadline
        && matches!(
            reply,
            Response::Release(Err(LockError::NotHeld | LockError::NotOwner))
        )
}

/// When a release the store answered with `outcome` at its `now` ended the lease: then, or at
/// the end of its minimum hold (the lease keeps its place until then).
#[must_use]
pub const fn released_at(outcome: ReleaseOutcome, now: Instant) -> Instant {
    match outcome {
        ReleaseOutcome::Released => now,
        ReleaseOutcome::HeldUntil { until } => until,
    }
}

/// The answer of a release sent once the lease was lost on its holder's clock (or known lost):
/// the refusal that ended it if one was heard, else `expired` at its `deadline`.
#[must_use]
pub fn loss_answer(refusal: Option<LockError>, deadline: Instant) -> LockError {
    refusal.unwrap_or(LockError::Expired { deadline })
}

/// What a release's answer means for the lease that sent it ([`released`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Released {
    /// This release ended the lease, at `at` (store's time; see [`released_at`]).
    Released {
        /// When the lease ended.
        at: Instant,
    },
    /// The lease was lost, before the release was sent or as the store's refusal says: the
    /// release answers `refusal`, and the lease counts as lost.
    Lost {
        /// What the release answers.
        refusal: LockError,
        /// When the release freed a lease the store still held (its holder had stopped
        /// believing in it early, on its own clock); `None` if the store held it no more.
        freed_at: Option<Instant>,
    },
}

/// Settles the answer of a lease's release: `reply`, decided at the store's `now` (`unsure`:
/// the call's result was ambiguous, or an earlier attempt of this release failed with a store
/// error; `deadline`: the lease's deadline as its holder knew it). `lost_before`: the loss
/// answer ([`loss_answer`]) if the holder had stopped holding the lease before it sent the
/// release; whatever the store says then, the release answers that loss (the store may still
/// have held the lease: freeing it hands the key on sooner). `None` if `reply` is not a
/// release's answer.
#[must_use]
pub fn released(
    reply: &Response,
    unsure: bool,
    now: Instant,
    deadline: Instant,
    lost_before: Option<LockError>,
) -> Option<Released> {
    let Response::Release(answer) = reply else {
        return None;
    };
    let freed_at = answer
        .as_ref()
        .ok()
        .map(|outcome| released_at(*outcome, now));
    Some(match (answer, lost_before) {
        (Err(e), Some(_)) => Released::Lost {
            refusal: e.clone(),
            freed_at: None,
        },
        (Ok(_), Some(loss)) => Released::Lost {
            refusal: loss,
            freed_at,
        },
        (Ok(outcome), None) => Released::Released {
            at: released_at(*outcome, now),
        },
        (Err(_), None) if release_took_effect(reply, unsure, now, deadline) => {
            Released::Released { at: now }
        }
        (Err(e), None) => Released::Lost {
            refusal: e.clone(),
            freed_at: None,
        },
    })
}

/// What an extension's answer means for the lease that sent it ([`extended`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extension {
    /// The lease holds until the grant's deadline.
    Extended(Grant),
    /// Refused because the lease is over ([`LockError::lease_loss`]): the lease is lost.
    Lost(LockError),
    /// Refused for another reason (bad input, a capacity limit): the lease is as it was.
    Refused(LockError),
}

/// Settles the answer of a lease's extension (`None` if `reply` is not an extension's answer).
#[must_use]
pub fn extended(reply: &Response) -> Option<Extension> {
    let Response::Extend(answer) = reply else {
        return None;
    };
    Some(match answer {
        Ok(grant) => Extension::Extended(*grant),
        Err(e) if e.error_code().is_lease_loss() => Extension::Lost(e.clone()),
        Err(e) => Extension::Refused(e.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_core::Fence;

    const DEADLINE: Instant = Instant(50_000);

    fn release(answer: Result<ReleaseOutcome, LockError>) -> Response {
        Response::Release(answer)
    }

    #[test]
    fn a_release_answers_the_loss_once_the_holder_stopped_holding_whatever_the_store_says() {
        let loss = loss_answer(None, DEADLINE);
        assert_eq!(loss, LockError::Expired { deadline: DEADLINE });
        // The store still held it (this holder stopped believing early): freed, answered lost.
        let freed = released(
            &release(Ok(ReleaseOutcome::Released)),
            false,
            Instant(49_990),
            DEADLINE,
            Some(loss.clone()),
        );
        let expect = Released::Lost {
            refusal: loss.clone(),
            freed_at: Some(Instant(49_990)),
        };
        assert_eq!(freed, Some(expect));
        // The store's own refusal is the better answer when there is one.
        let stolen = LockError::Stolen {
            at: Instant(40_000),
        };
        let refused = released(
            &release(Err(stolen.clone())),
            false,
            Instant(49_990),
            DEADLINE,
            Some(loss),
        );
        let expect = Released::Lost {
            refusal: stolen,
            freed_at: None,
        };
        assert_eq!(refused, Some(expect));
    }

    #[test]
    fn a_held_lease_is_released_now_or_at_its_minimum_hold_and_an_unsure_refusal_took_effect() {
        let at = |reply, unsure| released(&reply, unsure, Instant(49_000), DEADLINE, None);
        let now = Released::Released {
            at: Instant(49_000),
        };
        assert_eq!(
            at(release(Ok(ReleaseOutcome::Released)), false),
            Some(now.clone())
        );
        let until = Instant(52_000);
        let held = release(Ok(ReleaseOutcome::HeldUntil { until }));
        assert_eq!(at(held, false), Some(Released::Released { at: until }));
        // An answer lost after the write: the re-read finds the key not ours, before the
        // deadline: this release did it.
        assert_eq!(at(release(Err(LockError::NotHeld)), true), Some(now));
        let sure = Released::Lost {
            refusal: LockError::NotHeld,
            freed_at: None,
        };
        assert_eq!(at(release(Err(LockError::NotHeld)), false), Some(sure));
        // Past the deadline, `not-held` may be the expiry's doing: lost.
        let late = released(
            &release(Err(LockError::NotOwner)),
            true,
            DEADLINE,
            DEADLINE,
            None,
        );
        assert!(matches!(late, Some(Released::Lost { .. })));
        assert_eq!(at(Response::Extend(Err(LockError::NotHeld)), false), None);
    }

    #[test]
    fn only_refusals_that_end_the_lease_lose_it_on_an_extension() {
        let grant = Grant {
            fence: Fence(3),
            deadline: DEADLINE,
        };
        let extend = |answer| extended(&Response::Extend(answer));
        assert_eq!(extend(Ok(grant)), Some(Extension::Extended(grant)));
        for lost in [
            LockError::Expired { deadline: DEADLINE },
            LockError::Stolen { at: Instant(1) },
            LockError::NotHeld,
            LockError::NotOwner,
        ] {
            assert_eq!(extend(Err(lost.clone())), Some(Extension::Lost(lost)));
        }
        let bad = LockError::TtlZero;
        assert_eq!(extend(Err(bad.clone())), Some(Extension::Refused(bad)));
        assert_eq!(extended(&release(Ok(ReleaseOutcome::Released))), None);
    }
}
