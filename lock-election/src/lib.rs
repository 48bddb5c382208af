//! Leader election over an expiring lock, for every blocking Rust face: [`Election`] and the
//! driver of the core's campaign recipe ([`lock_core::election::Campaign`]), written once over
//! an [`Electorate`] (a lock that hands out a [`Candidacy`]: how a face asks for the election's
//! key, extends and releases its lease) and a [`Body`] (what a term runs: a closure on a
//! thread, a process). `lock_store::election` (replicas over a store) and
//! `host_wasmtime::election` (the plugins of one host) are its faces; `docs/election.md` is the
//! user's guide.
//!
//! It decides nothing: when to extend, when the stop signal fires and when to campaign again
//! are the recipe's, and so is what follows a refused ask ([`Refusal`]); what a term is (a
//! lease, its fence) is the lock's; how a face's answer reads in the lock's names (a
//! [`Refusal`], an extension lost or only failed) is its [`Candidacy`]'s, written once.
#![warn(missing_docs)]

mod body;
mod control;
mod driver;
mod election;
mod leader;
mod term;

pub use body::Body;
pub use control::Control;
pub use driver::{run, run_with, Asked, Candidacy, Extended};
pub use election::{Election, Electorate};
pub use leader::Leader;
pub use lock_core::election::{BadCampaign, Campaign, CampaignOptions, Refusal, StopReason};
pub use term::Term;
