//! The shared conformance vectors of the expiring-lock core, and a runner for them.
//!
//! `tests/vectors/*.json` pin the behaviour of the lock table as data: one file per behaviour
//! group, each a list of scenarios, each a list of steps with the exact expected answer and events.
//! Every runtime (native `lock-core`, the WebAssembly component, the npm package, the browser
//! build) runs the same files through a small [`Driver`]: this crate parses the files strictly
//! ([`mod@format`]), runs them against any driver ([`run_file`]) and reports failures as
//! `file / scenario / step N: expected X, got Y`. [`NativeDriver`] runs them against `lock-core`.
//!
//! ```
//! use lock_conformance::{run_file, NativeDriver};
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/acquire.json");
//! let report = run_file(&mut NativeDriver::default(), path.as_ref()).unwrap();
//! assert!(report.failures.is_empty(), "{report}");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod campaign;
pub mod format;
pub mod hex;
pub mod native;
pub mod record;
mod runner;

pub use format::{
    ErrorCase, EventCase, HolderView, KeyView, ModeName, Op, OptionsSpec, Outcome, QueryKey,
    QueryView, StatsView,
};
pub use native::{BackendDriver, NativeDriver};
pub use runner::{
    check, load_file, parse_file, run_file, run_loaded, run_paths, vector_files, Failure,
    LoadError, LoadedFile, Report,
};

/// What a runtime answered to one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // test data, built once per step; on wasm32 the stats view dominates
pub enum Answer {
    /// `try-acquire`, `acquire`, `steal`, `release`, `extend`, `cancel-wait`, `renew-wait`,
    /// `restore`.
    Result(Result<Outcome, ErrorCase>),
    /// `inspect`.
    Inspect(Result<Option<KeyView>, ErrorCase>),
    /// `stats`, with every field filled in.
    Stats(StatsView),
    /// `next-wakeup`.
    Wakeup(Option<u64>),
    /// `snapshot`.
    Snapshot(Vec<u8>),
    /// `handle-timeout`, `raise-fence-floor`.
    Nothing,
    /// `query`.
    Query(Result<QueryView, ErrorCase>),
    /// `handle-timeout-bounded`: whether more changes are due.
    More(bool),
    /// `cancel-all-waits`: how many waiters left.
    Count(u64),
    /// A reply that cannot answer the operation (a runtime that answered the wrong kind of
    /// value); never matches an expectation.
    Unexpected(String),
}

/// A runtime under test: a lock table behind some boundary (native, component, JS...).
pub trait Driver {
    /// Starts a fresh table with these limits (each scenario starts one).
    ///
    /// # Errors
    /// A description of what went wrong in the runtime.
    fn start(&mut self, limits: &lock_core::Limits) -> Result<(), String>;

    /// Runs one operation on the current table.
    ///
    /// # Errors
    /// A description of a runtime failure (not a lock error: those are part of the [`Answer`]).
    fn run(&mut self, op: &Op) -> Result<Answer, String>;

    /// Drains the table's pending events, oldest first.
    ///
    /// # Errors
    /// A description of a runtime failure.
    fn drain_events(&mut self) -> Result<Vec<EventCase>, String>;
}
