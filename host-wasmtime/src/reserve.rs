//! The durable reservation of fencing tokens and clock time (`path.reserve`): a token or an
//! instant leaves the host only once a ceiling above it is on disk, so no restart can issue a
//! token twice or run the clock backwards. The timer thread keeps the ceilings a block ahead
//! with the state unlocked; a request renews inline only if it fell a whole block behind.

use lock_core::{Fence, Instant};

use crate::inner::{Inner, State};
use crate::persist::{self, Reservation, CLOCK_BLOCK, FENCE_BLOCK};
use crate::Error;

impl Inner {
    /// Makes sure `fence` may leave the host: at or below the durable fence ceiling (renewed
    /// inline if not, which happens only if the timer thread fell a whole block behind).
    pub(crate) fn admit_fence(&self, st: &mut State, fence: Fence) -> Result<(), Error> {
        st.fence_seen = st.fence_seen.max(fence);
        let Some(ceilings) = st.ceilings else {
            return Ok(());
        };
        if fence > ceilings.fence_ceiling {
            self.renew_now(
                st,
                Reservation {
                    fence_ceiling: fence.saturating_add(FENCE_BLOCK),
                    clock_ceiling: Instant::ZERO,
                },
            )?;
        } else if fence.saturating_add(FENCE_BLOCK / 2) > ceilings.fence_ceiling {
            self.want_renewal(st);
        }
        Ok(())
    }

    pub(crate) fn want_renewal(&self, st: &mut State) {
        if !st.renew_wanted {
            st.renew_wanted = true;
            st.armed = Instant::ZERO;
            self.timer.notify_all();
        }
    }

    /// Writes ceilings at least `want` (never lower than those on disk); returns them.
    fn write_ceilings(&self, want: Reservation) -> Result<Reservation, Error> {
        let Some(p) = &self.persist else {
            return Ok(want);
        };
        let mut on_disk = p
            .reserve_io
            .lock()
            .map_err(|_| Error::Persist("reservation writer poisoned by a panic".into()))?;
        let next = Reservation {
            fence_ceiling: on_disk.fence_ceiling.max(want.fence_ceiling),
            clock_ceiling: on_disk.clock_ceiling.max(want.clock_ceiling),
        };
        if next != *on_disk {
            persist::save_reservation(&p.path, next)?;
            *on_disk = next;
        }
        Ok(next)
    }

    pub(crate) fn renew_now(&self, st: &mut State, want: Reservation) -> Result<(), Error> {
        match self.write_ceilings(want) {
            Ok(written) => {
                st.ceilings = Some(written);
                Ok(())
            }
            Err(e) => {
                st.persist_error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The timer thread's part of the reservation: moves both ceilings a block ahead of what
    /// was used, with the state unlocked while the file is written.
    pub(crate) fn renew_ahead(&self) {
        let want = {
            let Ok(mut st) = self.lock() else { return };
            if !std::mem::take(&mut st.renew_wanted) {
                return;
            }
            Reservation {
                fence_ceiling: st.fence_seen.saturating_add(FENCE_BLOCK),
                clock_ceiling: self.clock.now().saturating_add(CLOCK_BLOCK),
            }
        };
        let written = self.write_ceilings(want);
        let Ok(mut st) = self.lock() else { return };
        match written {
            Ok(written) => {
                let known = st.ceilings.unwrap_or_default();
                st.ceilings = Some(Reservation {
                    fence_ceiling: known.fence_ceiling.max(written.fence_ceiling),
                    clock_ceiling: known.clock_ceiling.max(written.clock_ceiling),
                });
            }
            Err(e) => {
                drop(st);
                self.report(e);
            }
        }
    }
}
