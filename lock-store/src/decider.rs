//! The deciders `lock-store` chooses between at run time: the native core, or the lock component
//! in wasmtime (`Component`, feature `component`). The [`Decider`] trait and [`Native`] are the
//! protocol's (`lock-protocol`).

use lock_core::{Fence, Instant, KeyRecord, Limits, Request, Response, Step};

pub use lock_protocol::decider::{DecideError, Decider, Decision, InspectReply, Native};

use lock_protocol::records::Stored;

#[cfg(feature = "component")]
pub use component::{Component, ComponentRecord};

#[cfg(feature = "component")]
mod component {
    use host_wasmtime::{ComponentRecords, HostError, LockComponent, RecordStep, SandboxLimits};
    use lock_core::{Fence, Instant, Limits, Request, Response};

    use super::{DecideError, Decider, Decision, InspectReply};
    use lock_protocol::records::Stored;

    /// The lock component decides, in its own wasmtime instance (sandboxed: memory and time
    /// bounded per call).
    #[derive(Debug)]
    pub struct Component(ComponentRecords);

    impl Component {
        /// A decider running the component embedded in `host-wasmtime`.
        ///
        /// # Errors
        /// [`HostError`] if it cannot be loaded or instantiated.
        pub fn embedded() -> Result<Self, HostError> {
            Component::new(&LockComponent::embedded()?)
        }

        /// A decider running `component` (one instance of it).
        ///
        /// # Errors
        /// [`HostError`] if it cannot be instantiated.
        pub fn new(component: &LockComponent) -> Result<Self, HostError> {
            Ok(Component(component.records(SandboxLimits::default())?))
        }
    }

    /// A record as the component decider keeps it: the bytes and their tokens, decoded by the
    /// component at each call.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct ComponentRecord {
        bytes: Option<Vec<u8>>,
        fences: Vec<Fence>,
    }

    /// When the leases of the component's new record let go of their places: read from its
    /// bytes by the native decoder (a derived figure the store keeps for its recovery delay; the
    /// component decided the record). Its fresh tokens are still provisional: each stands for
    /// itself.
    fn holds_until(bytes: Option<&[u8]>, fresh_fences: usize, limits: &Limits) -> Option<Instant> {
        let provisional: Vec<Fence> = (0..fresh_fences as u64)
            .map(|i| Fence(lock_core::record::PROVISIONAL_BASE + i))
            .collect();
        let record = lock_core::KeyRecord::decode(bytes?, &provisional, limits).ok()?;
        record.holds_until()
    }

    fn decision<R>(
        before: &ComponentRecord,
        r: RecordStep<R>,
        limits: &Limits,
    ) -> Decision<ComponentRecord, R> {
        let holds_until = match r.step.changed {
            true => holds_until(r.record.as_deref(), r.step.fresh_fences, limits),
            false => None,
        };
        let after = if r.step.changed {
            ComponentRecord {
                bytes: r.record.clone(),
                fences: Vec::new(),
            }
        } else {
            before.clone()
        };
        Decision {
            bytes: r.record,
            clock: r.clock,
            next_deadline: r.next_deadline,
            forget_at: r.forget_at,
            holds_until,
            step: r.step,
            after,
        }
    }

    fn failed(e: &HostError) -> DecideError {
        DecideError::Failed(e.to_string())
    }

    impl Decider for Component {
        type Record = ComponentRecord;

        fn empty(&mut self) -> ComponentRecord {
            ComponentRecord::default()
        }

        fn load(&mut self, stored: &Stored, _: &Limits) -> Result<ComponentRecord, DecideError> {
            // Decoded (and checked) by the component at each call.
            Ok(ComponentRecord {
                bytes: Some(stored.bytes.clone()),
                fences: stored.fences.clone(),
            })
        }

        fn handle(
            &mut self,
            record: &ComponentRecord,
            request: Request<'_>,
            limits: &Limits,
        ) -> Result<Decision<ComponentRecord, Response>, DecideError> {
            let r = (self.0)
                .handle(limits, record.bytes.as_deref(), &record.fences, request)
                .map_err(|e| failed(&e))?
                .map_err(DecideError::Corrupt)?;
            Ok(decision(record, r, limits))
        }

        fn inspect(
            &mut self,
            record: &ComponentRecord,
            key: &str,
            now: Instant,
            limits: &Limits,
        ) -> Result<Decision<ComponentRecord, InspectReply>, DecideError> {
            let r = (self.0)
                .inspect(limits, key, record.bytes.as_deref(), &record.fences, now)
                .map_err(|e| failed(&e))?
                .map_err(DecideError::Corrupt)?;
            Ok(decision(record, r, limits))
        }

        fn settle(&mut self, record: &mut ComponentRecord, fresh: &[Fence]) {
            record.fences = fresh.to_vec();
        }
    }
}

/// Either decider, chosen at run time (what [`Locks`](crate::Locks) holds).
#[derive(Debug)]
pub enum AnyDecider {
    /// The native core.
    Native(Native),
    /// The lock component (boxed: an instance is large).
    #[cfg(feature = "component")]
    Component(Box<Component>),
}

/// A record as [`AnyDecider`] keeps it.
#[derive(Clone, Debug)]
pub enum AnyRecord {
    /// Kept by the native core.
    Native(KeyRecord),
    /// Kept for the lock component.
    #[cfg(feature = "component")]
    Component(ComponentRecord),
}

fn wrap<Rec, R>(d: Decision<Rec, R>, f: impl FnOnce(Rec) -> AnyRecord) -> Decision<AnyRecord, R> {
    Decision {
        step: d.step,
        after: f(d.after),
        bytes: d.bytes,
        clock: d.clock,
        next_deadline: d.next_deadline,
        forget_at: d.forget_at,
        holds_until: d.holds_until,
    }
}

#[cfg(feature = "component")]
fn mismatch() -> DecideError {
    DecideError::Failed("a record kept by the other decider".into())
}

/// Runs `$call` on the decider and a record of the same kind (`$d`, `$r`), and wraps the
/// decided record back: the one dispatch of [`AnyDecider`]'s transitions.
macro_rules! dispatch {
    ($decider:expr, $record:expr, |$d:ident, $r:ident| $call:expr) => {
        match ($decider, $record) {
            (AnyDecider::Native($d), AnyRecord::Native($r)) => Ok(wrap($call?, AnyRecord::Native)),
            #[cfg(feature = "component")]
            (AnyDecider::Component($d), AnyRecord::Component($r)) => {
                Ok(wrap($call?, AnyRecord::Component))
            }
            #[cfg(feature = "component")]
            _ => Err(mismatch()),
        }
    };
}

impl Decider for AnyDecider {
    type Record = AnyRecord;

    fn empty(&mut self) -> AnyRecord {
        match self {
            AnyDecider::Native(d) => AnyRecord::Native(d.empty()),
            #[cfg(feature = "component")]
            AnyDecider::Component(d) => AnyRecord::Component(d.empty()),
        }
    }

    fn load(&mut self, stored: &Stored, limits: &Limits) -> Result<AnyRecord, DecideError> {
        match self {
            AnyDecider::Native(d) => d.load(stored, limits).map(AnyRecord::Native),
            #[cfg(feature = "component")]
            AnyDecider::Component(d) => d.load(stored, limits).map(AnyRecord::Component),
        }
    }

    fn handle(
        &mut self,
        record: &AnyRecord,
        request: Request<'_>,
        limits: &Limits,
    ) -> Result<Decision<AnyRecord, Response>, DecideError> {
        dispatch!(self, record, |d, r| d.handle(r, request, limits))
    }

    fn handle_each<'r>(
        &mut self,
        record: &AnyRecord,
        first: Request<'r>,
        rest: &mut dyn Iterator<Item = Request<'r>>,
        limits: &Limits,
    ) -> Result<Decision<AnyRecord, Vec<Step<Response>>>, DecideError> {
        dispatch!(self, record, |d, r| d.handle_each(r, first, rest, limits))
    }

    fn inspect(
        &mut self,
        record: &AnyRecord,
        key: &str,
        now: Instant,
        limits: &Limits,
    ) -> Result<Decision<AnyRecord, InspectReply>, DecideError> {
        dispatch!(self, record, |d, r| d.inspect(r, key, now, limits))
    }

    fn settle(&mut self, record: &mut AnyRecord, fresh: &[Fence]) {
        match (self, record) {
            (AnyDecider::Native(d), AnyRecord::Native(r)) => d.settle(r, fresh),
            #[cfg(feature = "component")]
            (AnyDecider::Component(d), AnyRecord::Component(r)) => d.settle(r, fresh),
            #[cfg(feature = "component")]
            _ => {}
        }
    }
}
