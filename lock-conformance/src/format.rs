//! The vector file format, parsed strictly: an unknown field, a missing field, or a field that
//! does not belong to the step's operation is a load error, never a silently skipped check.
//! The format is described for humans in `tests/vectors/README.md`.

use std::collections::BTreeMap;

use lock_core::Stats;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::hex;

/// One vector file: a behaviour group.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VectorFile {
    /// What the file covers.
    pub description: String,
    /// Its scenarios, each run on a fresh table.
    pub scenarios: Vec<Scenario>,
}

/// One scenario: a fresh table with optional limit overrides, and its steps.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Unique within the file; used in failure reports.
    pub name: String,
    /// Why the scenario exists (optional prose).
    #[serde(default)]
    pub description: Option<String>,
    /// Overrides of `lock_core::Limits::default()`.
    #[serde(default)]
    pub limits: LimitsSpec,
    /// The steps, in order.
    pub steps: Vec<RawStep>,
}

/// Limits overrides; absent fields keep the core's documented defaults.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct LimitsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_key_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_owner_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_keys: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_waiters_per_key: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_waiters: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_retention: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_expired_records: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_events: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_holders_per_key: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_metadata_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_delay: Option<u64>,
}

impl LimitsSpec {
    /// The core's defaults with these overrides applied.
    #[must_use]
    pub fn resolve(&self) -> lock_core::Limits {
        let d = lock_core::Limits::default();
        lock_core::Limits {
            max_key_bytes: self.max_key_bytes.unwrap_or(d.max_key_bytes),
            max_owner_bytes: self.max_owner_bytes.unwrap_or(d.max_owner_bytes),
            max_ttl: lock_core::Duration(self.max_ttl.unwrap_or(d.max_ttl.0)),
            max_keys: self.max_keys.unwrap_or(d.max_keys),
            max_waiters_per_key: self.max_waiters_per_key.unwrap_or(d.max_waiters_per_key),
            max_waiters: self.max_waiters.unwrap_or(d.max_waiters),
            expired_retention: lock_core::Duration(
                self.expired_retention.unwrap_or(d.expired_retention.0),
            ),
            max_expired_records: self.max_expired_records.unwrap_or(d.max_expired_records),
            max_pending_events: self.max_pending_events.unwrap_or(d.max_pending_events),
            max_holders_per_key: self.max_holders_per_key.unwrap_or(d.max_holders_per_key),
            max_metadata_bytes: self.max_metadata_bytes.unwrap_or(d.max_metadata_bytes),
            lock_delay: lock_core::Duration(self.lock_delay.unwrap_or(d.lock_delay.0)),
        }
    }
}

/// The operation names.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum OpName {
    TryAcquire,
    Acquire,
    Release,
    Extend,
    CancelWait,
    RenewWait,
    HandleTimeout,
    Inspect,
    Stats,
    NextWakeup,
    Snapshot,
    Restore,
    Steal,
    Query,
    HandleTimeoutBounded,
    RaiseFenceFloor,
    CancelAllWaits,
}

/// A step as written in the file: every field any operation can take. [`RawStep::parse`] checks
/// that exactly the fields of its operation are present.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RawStep {
    pub op: OpName,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub now: Option<u64>,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub ttl: Option<u64>,
    #[serde(default)]
    pub wait_deadline: Option<u64>,
    #[serde(default)]
    pub fence: Option<u64>,
    #[serde(default)]
    pub hex: Option<String>,
    #[serde(default)]
    pub mode: Option<ModeName>,
    #[serde(default)]
    pub permits: Option<u32>,
    #[serde(default)]
    pub min_hold: Option<u64>,
    #[serde(default)]
    pub lock_delay: Option<u64>,
    #[serde(default)]
    pub metadata: Option<String>,
    #[serde(default)]
    pub wait_alive: Option<u64>,
    #[serde(default)]
    pub prefix: Option<String>,
    #[serde(default)]
    pub after: Option<String>,
    #[serde(default)]
    pub limit: Option<u64>,
    #[serde(default)]
    pub max_changes: Option<u32>,
    #[serde(default)]
    pub floor: Option<u64>,
    #[serde(default)]
    pub ok: Option<Outcome>,
    #[serde(default)]
    pub err: Option<ErrorCase>,
    #[serde(default, deserialize_with = "present")]
    pub expect: Option<Value>,
    #[serde(default)]
    pub events: Vec<EventCase>,
}

/// Keeps an explicit `null` apart from an absent field.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A successful outcome, named as in the WIT contract.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[allow(missing_docs)]
pub enum Outcome {
    Acquired { fence: u64, deadline: u64 },
    AlreadyHeld { fence: u64, deadline: u64 },
    Queued { position: u64 },
    AlreadyWaiting { position: u64 },
    Released,
    Extended { fence: u64, deadline: u64 },
    Cancelled,
    Restored,
    HeldUntil { until: u64 },
}

/// An error, named as in the WIT contract (`lock_core::LockError::code`), with its payload.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[allow(missing_docs)]
pub enum ErrorCase {
    KeyEmpty,
    KeyTooLong { len: u64, max: u64 },
    KeyInvalid,
    OwnerEmpty,
    OwnerTooLong { len: u64, max: u64 },
    OwnerInvalid,
    TtlZero,
    TtlTooLong { ttl: u64, max: u64 },
    DeadlineOverflow { now: u64, ttl: u64 },
    TableFull { max_keys: u64 },
    QueueFull { max_waiters_per_key: u64 },
    TooManyWaiters { max_waiters: u64 },
    Held { deadline: u64 },
    NotOwner,
    NotHeld,
    Expired { deadline: u64 },
    NotWaiting,
    InvalidLimits { limit: String },
    SnapshotTruncated,
    SnapshotBadMagic,
    SnapshotVersion { found: u64, supported: u64 },
    SnapshotChecksum,
    SnapshotCorrupt { reason: String },
    SnapshotExceedsLimits { limit: String },
    MetadataTooLong { len: u64, max: u64 },
    MetadataInvalid,
    TooManyPermits { permits: u64, max: u64 },
    PermitsMismatch { permits: u64 },
    ModeMismatch,
    MinHoldTooLong { min_hold: u64, ttl: u64 },
    LockDelayTooLong { lock_delay: u64, max: u64 },
    Stolen { at: u64 },
    QueryLimit { max: u64 },
}

/// A lease's mode, as vector files name it.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ModeName {
    #[default]
    Exclusive,
    Shared,
}

impl ModeName {
    /// Whether this is the default mode (exclusive).
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == ModeName::Exclusive
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// The options of an acquire or a steal, as the step's fields (all optional; absent is the
/// default: exclusive, no permits, no minimum hold, no lock-delay, no metadata, the place kept
/// for the whole wait).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct OptionsSpec {
    #[serde(default, skip_serializing_if = "ModeName::is_default")]
    pub mode: ModeName,
    #[serde(default, skip_serializing_if = "is_default")]
    pub permits: u32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub min_hold: u64,
    #[serde(default, skip_serializing_if = "is_default")]
    pub lock_delay: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub metadata: String,
    #[serde(default, skip_serializing_if = "is_default")]
    pub wait_alive: u64,
}

impl OptionsSpec {
    /// Whether these are the default options (a plain exclusive acquire).
    #[must_use]
    pub fn is_plain(&self) -> bool {
        *self == OptionsSpec::default()
    }
}

/// An event, named as in the WIT contract.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[allow(missing_docs)]
pub enum EventCase {
    Expired {
        key: String,
        owner: String,
        fence: u64,
        at: u64,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        metadata: String,
    },
    Granted {
        key: String,
        owner: String,
        fence: u64,
        deadline: u64,
        at: u64,
        #[serde(default, skip_serializing_if = "ModeName::is_default")]
        mode: ModeName,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        metadata: String,
    },
    WaitTimedOut {
        key: String,
        owner: String,
        at: u64,
    },
    Stolen {
        key: String,
        owner: String,
        fence: u64,
        at: u64,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        metadata: String,
    },
}

impl EventCase {
    /// The key it happened to.
    #[must_use]
    pub fn key(&self) -> &str {
        match self {
            EventCase::Expired { key, .. }
            | EventCase::Granted { key, .. }
            | EventCase::WaitTimedOut { key, .. }
            | EventCase::Stolen { key, .. } => key,
        }
    }
}

/// A key in use, as inspection and query report it: its leases, its waiters and its permits.
///
/// In a file, a key with one plain exclusive lease may be written as that lease's `owner`,
/// `fence` and `deadline` beside `waiters` (the form of every vector before shared leases);
/// otherwise `holders` lists every lease. Both read into this one form.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(try_from = "RawKeyView", into = "RawKeyView")]
#[allow(missing_docs)]
pub struct KeyView {
    pub holders: Vec<HolderView>,
    pub waiters: Vec<WaiterView>,
    pub permits: u32,
}

/// A lease, as inspection reports it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct HolderView {
    pub owner: String,
    pub fence: u64,
    pub deadline: u64,
    #[serde(default, skip_serializing_if = "ModeName::is_default")]
    pub mode: ModeName,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub metadata: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_until: Option<u64>,
    /// `released`, `expired` or `stolen` for a lease that still takes its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// When it was granted. An expectation checks it only where it names it: the runner leaves
    /// an answer's grant instant out wherever the expected holder has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_at: Option<u64>,
}

impl HolderView {
    fn is_plain(&self) -> bool {
        self.mode.is_default()
            && self.metadata.is_empty()
            && self.min_until.is_none()
            && self.ended.is_none()
            && self.granted_at.is_none()
    }
}

/// A key view as written in a file (see [`KeyView`]).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawKeyView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holders: Option<Vec<HolderView>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    waiters: Vec<WaiterView>,
    #[serde(default, skip_serializing_if = "is_default")]
    permits: u32,
}

impl TryFrom<RawKeyView> for KeyView {
    type Error = String;

    fn try_from(raw: RawKeyView) -> Result<Self, String> {
        let holders = match (raw.owner, raw.fence, raw.deadline, raw.holders) {
            (Some(owner), Some(fence), Some(deadline), None) => vec![HolderView {
                owner,
                fence,
                deadline,
                mode: ModeName::Exclusive,
                metadata: String::new(),
                min_until: None,
                ended: None,
                granted_at: None,
            }],
            (None, None, None, Some(holders)) if !holders.is_empty() => holders,
            _ => {
                return Err(
                    "a key needs either \"owner\", \"fence\" and \"deadline\", or a non-empty \"holders\""
                        .into(),
                )
            }
        };
        Ok(KeyView {
            holders,
            waiters: raw.waiters,
            permits: raw.permits,
        })
    }
}

impl From<KeyView> for RawKeyView {
    fn from(view: KeyView) -> Self {
        let mut raw = RawKeyView {
            owner: None,
            fence: None,
            deadline: None,
            holders: None,
            waiters: view.waiters,
            permits: view.permits,
        };
        match <[HolderView; 1]>::try_from(view.holders) {
            Ok([h]) if h.is_plain() => {
                raw.owner = Some(h.owner);
                raw.fence = Some(h.fence);
                raw.deadline = Some(h.deadline);
            }
            Ok([h]) => raw.holders = Some(vec![h]),
            Err(holders) => raw.holders = Some(holders),
        }
        raw
    }
}

/// A waiter, as inspection reports it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct WaiterView {
    pub owner: String,
    pub ttl: u64,
    pub wait_deadline: u64,
    /// The end of the wait it asked for, given only where it is after `wait_deadline` (a
    /// waiter that keeps its place by renewals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_end: Option<u64>,
    #[serde(default, skip_serializing_if = "ModeName::is_default")]
    pub mode: ModeName,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub metadata: String,
}

/// A query's page: keys in byte order and the cursor of the next page.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct QueryView {
    pub keys: Vec<QueryKey>,
    #[serde(default)]
    pub next: Option<String>,
}

/// One key of a query's page (always with its `holders` listed).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct QueryKey {
    pub key: String,
    pub holders: Vec<HolderView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiters: Vec<WaiterView>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub permits: u32,
}

/// Stats; an expectation lists only the fields it checks.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(try_from = "BTreeMap<String, u64>", into = "BTreeMap<String, u64>")]
pub struct StatsView {
    /// Per field of [`Stats::FIELDS`], in its order: the value, or `None` if not listed.
    values: [Option<u64>; Stats::FIELDS.len()],
}

impl StatsView {
    /// Every field of `stats`.
    #[must_use]
    pub fn of(stats: &Stats) -> Self {
        StatsView {
            values: stats.values().map(Some),
        }
    }

    /// The value of `field` (a name of [`Stats::FIELDS`]), if listed.
    #[must_use]
    pub fn get(&self, field: &str) -> Option<u64> {
        let at = Stats::FIELDS.iter().position(|f| *f == field)?;
        self.values[at]
    }

    /// The fields of `self` (an expectation) that `actual` contradicts, as `(expected, got)` JSON.
    #[must_use]
    pub fn mismatch(&self, actual: &StatsView) -> Option<(Value, Value)> {
        let mut expected = serde_json::Map::new();
        let mut observed = serde_json::Map::new();
        for ((field, want), got) in Stats::FIELDS.iter().zip(self.values).zip(actual.values) {
            if let Some(want) = want {
                if got != Some(want) {
                    expected.insert((*field).into(), want.into());
                    observed.insert((*field).into(), got.map_or(Value::Null, Value::from));
                }
            }
        }
        (!expected.is_empty()).then_some((Value::Object(expected), Value::Object(observed)))
    }
}

impl TryFrom<BTreeMap<String, u64>> for StatsView {
    type Error = String;

    fn try_from(fields: BTreeMap<String, u64>) -> Result<Self, String> {
        let mut view = StatsView::default();
        for (name, value) in fields {
            let at = Stats::FIELDS
                .iter()
                .position(|f| *f == name)
                .ok_or_else(|| {
                    format!(
                        "unknown field `{name}`, expected one of {}",
                        Stats::FIELDS.map(|f| format!("`{f}`")).join(", ")
                    )
                })?;
            view.values[at] = Some(value);
        }
        Ok(view)
    }
}

impl From<StatsView> for BTreeMap<String, u64> {
    fn from(view: StatsView) -> Self {
        Stats::FIELDS
            .iter()
            .zip(view.values)
            .filter_map(|(f, v)| Some(((*f).to_owned(), v?)))
            .collect()
    }
}

/// A parsed, checked operation with everything a driver needs. It serializes as the step fields
/// of a vector file (`"op"` and its inputs), which is how sessions are recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum Op {
    TryAcquire {
        now: u64,
        key: String,
        owner: String,
        ttl: u64,
        #[serde(flatten)]
        options: OptionsSpec,
    },
    Acquire {
        now: u64,
        key: String,
        owner: String,
        ttl: u64,
        wait_deadline: u64,
        #[serde(flatten)]
        options: OptionsSpec,
    },
    Steal {
        now: u64,
        key: String,
        owner: String,
        ttl: u64,
        #[serde(flatten)]
        options: OptionsSpec,
    },
    Release {
        now: u64,
        key: String,
        owner: String,
        fence: u64,
    },
    Extend {
        now: u64,
        key: String,
        owner: String,
        fence: u64,
        ttl: u64,
    },
    CancelWait {
        now: u64,
        key: String,
        owner: String,
    },
    RenewWait {
        now: u64,
        key: String,
        owner: String,
        wait_deadline: u64,
    },
    HandleTimeout {
        now: u64,
    },
    Inspect {
        now: u64,
        key: String,
    },
    Query {
        now: u64,
        #[serde(skip_serializing_if = "String::is_empty")]
        prefix: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        after: String,
        limit: u64,
    },
    Stats {
        now: u64,
    },
    HandleTimeoutBounded {
        now: u64,
        max_changes: u32,
    },
    RaiseFenceFloor {
        floor: u64,
    },
    CancelAllWaits {
        now: u64,
    },
    NextWakeup,
    Snapshot {
        now: u64,
    },
    /// `bytes: None` restores the bytes of the scenario's latest `snapshot` step.
    Restore {
        #[serde(
            rename = "hex",
            skip_serializing_if = "Option::is_none",
            serialize_with = "hex_bytes"
        )]
        bytes: Option<Vec<u8>>,
    },
}

/// Snapshot bytes as the hex string vector files carry.
fn hex_bytes<S: serde::Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(bytes.as_deref().unwrap_or_default()))
}

impl Op {
    /// The operation's name in vector files (`try-acquire`, ...).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Op::TryAcquire { .. } => "try-acquire",
            Op::Acquire { .. } => "acquire",
            Op::Release { .. } => "release",
            Op::Extend { .. } => "extend",
            Op::CancelWait { .. } => "cancel-wait",
            Op::RenewWait { .. } => "renew-wait",
            Op::HandleTimeout { .. } => "handle-timeout",
            Op::Inspect { .. } => "inspect",
            Op::Stats { .. } => "stats",
            Op::NextWakeup => "next-wakeup",
            Op::Snapshot { .. } => "snapshot",
            Op::Restore { .. } => "restore",
            Op::Steal { .. } => "steal",
            Op::Query { .. } => "query",
            Op::HandleTimeoutBounded { .. } => "handle-timeout-bounded",
            Op::RaiseFenceFloor { .. } => "raise-fence-floor",
            Op::CancelAllWaits { .. } => "cancel-all-waits",
        }
    }

    /// The instant the operation is stamped with, if it takes one.
    #[must_use]
    pub fn now(&self) -> Option<u64> {
        match self {
            Op::TryAcquire { now, .. }
            | Op::Acquire { now, .. }
            | Op::Release { now, .. }
            | Op::Extend { now, .. }
            | Op::CancelWait { now, .. }
            | Op::RenewWait { now, .. }
            | Op::HandleTimeout { now }
            | Op::Inspect { now, .. }
            | Op::Stats { now }
            | Op::Snapshot { now }
            | Op::Steal { now, .. }
            | Op::Query { now, .. }
            | Op::HandleTimeoutBounded { now, .. }
            | Op::CancelAllWaits { now } => Some(*now),
            Op::NextWakeup | Op::Restore { .. } | Op::RaiseFenceFloor { .. } => None,
        }
    }

    /// The options of an acquire or a steal (`None` for every other operation).
    #[must_use]
    pub fn options(&self) -> Option<&OptionsSpec> {
        match self {
            Op::TryAcquire { options, .. }
            | Op::Acquire { options, .. }
            | Op::Steal { options, .. } => Some(options),
            _ => None,
        }
    }

    /// The key it is about, if any.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        match self {
            Op::TryAcquire { key, .. }
            | Op::Acquire { key, .. }
            | Op::Release { key, .. }
            | Op::Extend { key, .. }
            | Op::CancelWait { key, .. }
            | Op::RenewWait { key, .. }
            | Op::Steal { key, .. }
            | Op::Inspect { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The owner that makes the request, if any.
    #[must_use]
    pub fn owner(&self) -> Option<&str> {
        match self {
            Op::TryAcquire { owner, .. }
            | Op::Acquire { owner, .. }
            | Op::Release { owner, .. }
            | Op::Extend { owner, .. }
            | Op::CancelWait { owner, .. }
            | Op::RenewWait { owner, .. }
            | Op::Steal { owner, .. } => Some(owner),
            _ => None,
        }
    }
}

/// What a step expects of its operation's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // test data, built once per step; on wasm32 the stats view dominates
pub enum Expectation {
    /// An operation answered with `ok` or `err`.
    Result(Result<Outcome, ErrorCase>),
    /// `inspect`: the key's state (`None` = free), or an error.
    Inspect(Result<Option<KeyView>, ErrorCase>),
    /// `stats`: the listed fields.
    Stats(StatsView),
    /// `next-wakeup`.
    Wakeup(Option<u64>),
    /// `snapshot`: the exact bytes, if given.
    Snapshot(Option<Vec<u8>>),
    /// `handle-timeout`, `raise-fence-floor`: only the events are checked.
    Nothing,
    /// `query`: the page, or an error.
    Query(Result<QueryView, ErrorCase>),
    /// `handle-timeout-bounded`: whether more changes are due.
    More(bool),
    /// `cancel-all-waits`: how many waiters left.
    Count(u64),
}

/// A checked step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The operation.
    pub op: Op,
    /// What it must answer.
    pub expect: Expectation,
    /// The events it must produce (drained after the step), oldest first.
    pub events: Vec<EventCase>,
    /// The step's prose, if the file gives one (runners ignore it; the playground shows it).
    pub note: Option<String>,
}

/// The value of a required field, noting it as used.
fn need<T: Clone + Default>(
    op: &Value,
    field: &'static str,
    value: &Option<T>,
    used: &mut Vec<&'static str>,
) -> Result<T, String> {
    used.push(field);
    value
        .clone()
        .ok_or_else(|| format!("{op} needs \"{field}\""))
}

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl RawStep {
    /// Checks that the step has exactly the fields of its operation.
    ///
    /// # Errors
    /// A message naming the missing or misplaced field.
    pub fn parse(&self) -> Result<Step, String> {
        let name = to_json(&self.op);
        let mut used = vec!["op", "note", "events"];
        macro_rules! take {
            ($field:ident) => {
                need(&name, stringify!($field), &self.$field, &mut used)?
            };
        }
        let mut options = || {
            used.extend([
                "mode",
                "permits",
                "min_hold",
                "lock_delay",
                "metadata",
                "wait_alive",
            ]);
            OptionsSpec {
                mode: self.mode.unwrap_or_default(),
                permits: self.permits.unwrap_or_default(),
                min_hold: self.min_hold.unwrap_or_default(),
                lock_delay: self.lock_delay.unwrap_or_default(),
                metadata: self.metadata.clone().unwrap_or_default(),
                wait_alive: self.wait_alive.unwrap_or_default(),
            }
        };
        let options = matches!(
            self.op,
            OpName::TryAcquire | OpName::Acquire | OpName::Steal
        )
        .then(&mut options)
        .unwrap_or_default();
        let op = match self.op {
            OpName::TryAcquire => Op::TryAcquire {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
                ttl: take!(ttl),
                options,
            },
            OpName::Acquire => Op::Acquire {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
                ttl: take!(ttl),
                wait_deadline: take!(wait_deadline),
                options,
            },
            OpName::Steal => Op::Steal {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
                ttl: take!(ttl),
                options,
            },
            OpName::Query => {
                used.extend(["prefix", "after"]);
                Op::Query {
                    now: take!(now),
                    prefix: self.prefix.clone().unwrap_or_default(),
                    after: self.after.clone().unwrap_or_default(),
                    limit: take!(limit),
                }
            }
            OpName::HandleTimeoutBounded => Op::HandleTimeoutBounded {
                now: take!(now),
                max_changes: take!(max_changes),
            },
            OpName::RaiseFenceFloor => Op::RaiseFenceFloor {
                floor: take!(floor),
            },
            OpName::CancelAllWaits => Op::CancelAllWaits { now: take!(now) },
            OpName::Release => Op::Release {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
                fence: take!(fence),
            },
            OpName::Extend => Op::Extend {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
                fence: take!(fence),
                ttl: take!(ttl),
            },
            OpName::CancelWait => Op::CancelWait {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
            },
            OpName::RenewWait => Op::RenewWait {
                now: take!(now),
                key: take!(key),
                owner: take!(owner),
                wait_deadline: take!(wait_deadline),
            },
            OpName::HandleTimeout => Op::HandleTimeout { now: take!(now) },
            OpName::Inspect => Op::Inspect {
                now: take!(now),
                key: take!(key),
            },
            OpName::Stats => Op::Stats { now: take!(now) },
            OpName::NextWakeup => Op::NextWakeup,
            OpName::Snapshot => Op::Snapshot { now: take!(now) },
            OpName::Restore => {
                used.push("hex");
                Op::Restore {
                    bytes: self.hex.as_deref().map(hex::decode).transpose()?,
                }
            }
        };
        let expect = match self.op {
            OpName::TryAcquire
            | OpName::Acquire
            | OpName::Steal
            | OpName::Release
            | OpName::Extend
            | OpName::CancelWait
            | OpName::RenewWait
            | OpName::Restore => {
                used.extend(["ok", "err"]);
                Expectation::Result(match (&self.ok, &self.err) {
                    (Some(ok), None) => Ok(ok.clone()),
                    (None, Some(err)) => Err(err.clone()),
                    _ => return Err(format!("{name} needs exactly one of \"ok\" and \"err\"")),
                })
            }
            OpName::Inspect => {
                used.extend(["expect", "err"]);
                Expectation::Inspect(match (&self.expect, &self.err) {
                    (Some(v), None) => Ok(serde_json::from_value(v.clone())
                        .map_err(|e| format!("inspect \"expect\": {e}"))?),
                    (None, Some(err)) => Err(err.clone()),
                    _ => return Err("inspect needs exactly one of \"expect\" and \"err\"".into()),
                })
            }
            OpName::Stats => {
                let v = take!(expect);
                Expectation::Stats(
                    serde_json::from_value(v).map_err(|e| format!("stats \"expect\": {e}"))?,
                )
            }
            OpName::NextWakeup => {
                let v = take!(expect);
                Expectation::Wakeup(
                    serde_json::from_value(v)
                        .map_err(|e| format!("next-wakeup \"expect\": {e}"))?,
                )
            }
            OpName::Snapshot => {
                used.push("expect");
                let bytes = match &self.expect {
                    None => None,
                    Some(Value::String(s)) => Some(hex::decode(s)?),
                    Some(_) => return Err("snapshot \"expect\" must be a hex string".into()),
                };
                Expectation::Snapshot(bytes)
            }
            OpName::HandleTimeout | OpName::RaiseFenceFloor => Expectation::Nothing,
            OpName::Query => {
                used.extend(["expect", "err"]);
                Expectation::Query(match (&self.expect, &self.err) {
                    (Some(v), None) => Ok(serde_json::from_value(v.clone())
                        .map_err(|e| format!("query \"expect\": {e}"))?),
                    (None, Some(err)) => Err(err.clone()),
                    _ => return Err("query needs exactly one of \"expect\" and \"err\"".into()),
                })
            }
            OpName::HandleTimeoutBounded => {
                let v = take!(expect);
                Expectation::More(serde_json::from_value(v).map_err(|e| {
                    format!("handle-timeout-bounded \"expect\" must be true or false: {e}")
                })?)
            }
            OpName::CancelAllWaits => {
                let v = take!(expect);
                Expectation::Count(
                    serde_json::from_value(v)
                        .map_err(|e| format!("cancel-all-waits \"expect\" must be a count: {e}"))?,
                )
            }
        };
        let given = [
            ("now", self.now.is_some()),
            ("key", self.key.is_some()),
            ("owner", self.owner.is_some()),
            ("ttl", self.ttl.is_some()),
            ("wait_deadline", self.wait_deadline.is_some()),
            ("fence", self.fence.is_some()),
            ("hex", self.hex.is_some()),
            ("mode", self.mode.is_some()),
            ("permits", self.permits.is_some()),
            ("min_hold", self.min_hold.is_some()),
            ("lock_delay", self.lock_delay.is_some()),
            ("metadata", self.metadata.is_some()),
            ("wait_alive", self.wait_alive.is_some()),
            ("prefix", self.prefix.is_some()),
            ("after", self.after.is_some()),
            ("limit", self.limit.is_some()),
            ("max_changes", self.max_changes.is_some()),
            ("floor", self.floor.is_some()),
            ("ok", self.ok.is_some()),
            ("err", self.err.is_some()),
            ("expect", self.expect.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(f, p)| *p && !used.contains(f)) {
            return Err(format!("{name} does not take \"{field}\""));
        }
        Ok(Step {
            op,
            expect,
            events: self.events.clone(),
            note: self.note.clone(),
        })
    }
}
