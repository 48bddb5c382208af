//! What a term runs: the [`Body`] trait, and the closure-on-a-thread body of [`run`](crate::run).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};

use lock_core::election::StopReason;

use crate::control::Control;
use crate::term::Term;

/// What a term runs: the leader's body, started for each term and told of its stop signal.
pub trait Body {
    /// Start the body of `term`.
    fn start(&mut self, term: &Term);
    /// The term's stop signal fired (its [`Term`] already says so): a process is sent
    /// `SIGTERM`, say.
    fn stop(&mut self, term: &Term, reason: StopReason);
    /// Whether the body has returned (asked often while it runs).
    fn returned(&mut self) -> bool;
    /// It did not return within the grace after its stop signal: stop it if it can be (a
    /// process gets `SIGKILL`).
    fn abandon(&mut self);
    /// Wait until a body that still runs (abandoned) has returned.
    fn wait(&mut self);
}

type Panic = Box<dyn Any + Send + 'static>;

/// The body of [`run`](crate::run): a closure run on a scoped thread per term. A closure that
/// panics shuts the campaign down (its lease is released like any other); its panic is kept
/// for [`run`](crate::run) to resume.
pub(crate) struct ThreadBody<'scope, 'env, F> {
    pub(crate) scope: &'scope Scope<'scope, 'env>,
    pub(crate) body: Option<&'env mut F>,
    pub(crate) running: Option<ScopedJoinHandle<'scope, (&'env mut F, Option<Panic>)>>,
    /// Set by the body's thread when the closure is over, just before it kicks the driver (the
    /// thread is not finished yet then: waiting for `is_finished` would cost the driver a look).
    pub(crate) over: Arc<AtomicBool>,
    pub(crate) control: Control,
    pub(crate) panic: Option<Panic>,
}

impl<'scope, 'env, F: FnMut(&Term) + Send> Body for ThreadBody<'scope, 'env, F> {
    fn start(&mut self, term: &Term) {
        // The recipe starts a term only after the last body returned.
        if let Some(f) = self.body.take() {
            let t = term.clone();
            let control = self.control.clone();
            let over = Arc::new(AtomicBool::new(false));
            self.over = Arc::clone(&over);
            self.running = Some(self.scope.spawn(move || {
                let panic = catch_unwind(AssertUnwindSafe(|| f(&t))).err();
                if panic.is_some() {
                    control.shut_down();
                }
                over.store(true, Ordering::SeqCst);
                t.kick.kick();
                (f, panic)
            }));
        }
    }

    fn stop(&mut self, _term: &Term, _reason: StopReason) {}

    fn returned(&mut self) -> bool {
        if self.running.is_some() && !self.over.load(Ordering::SeqCst) {
            return false;
        }
        // Over: the join waits only for the thread's last steps.
        self.wait();
        true
    }

    fn abandon(&mut self) {}

    fn wait(&mut self) {
        if let Some(h) = self.running.take() {
            // The closure's panic is caught inside the thread: joining cannot fail.
            if let Ok((f, panic)) = h.join() {
                self.body = Some(f);
                if panic.is_some() {
                    self.panic = panic;
                }
            }
        }
    }
}
