//! The playground's model: simulated clients acting on one `lock-core` table, a per-key history
//! for the timeline, an event log in plain words, the session recorded as conformance-vector
//! steps (export), and step-by-step replay of an imported vector file. Pure Rust, no DOM: the
//! page (`crate::page`) renders it and feeds it clicks and clock ticks; the tests drive it
//! directly.
//!
//! Every operation goes through `lock_conformance::native::run_on`, the same function the
//! native vector driver uses, so what the playground shows, exports and replays is exactly what
//! the core answers.

use std::collections::BTreeMap;

use lock_conformance::format::{LimitsSpec, ModeName, OptionsSpec};
use lock_conformance::native::run_on;
use lock_conformance::{record, Answer, ErrorCase, EventCase, Op, Outcome};
use lock_core::{KeyInfo, LockTable, QueryPage};
use serde_json::Value;

use crate::clock::Clock;

mod guides;
#[cfg(test)]
mod kinds_tests;
mod narration;
mod replay;
mod share;
mod storage;
mod timeline;

pub use guides::GUIDES;
pub use narration::{LineKind, LogLine};
pub use replay::Replay;
pub use share::{FRAGMENT_PREFIX, MAX_SHARED_BYTES};
pub use storage::{Storage, StorageWrite};
pub use timeline::{End, Segment, TimelineView, WaitEnd, WaitSegment};

/// Keys offered in every client's key list (any other key can be typed).
pub const PRESET_KEYS: [&str; 3] = ["job:nightly-report", "db:migrations", "cache:rebuild"];

/// One simulated client: an owner name and the values of its input fields (as typed).
#[derive(Clone, Debug)]
pub struct Client {
    /// Stable id (used by the page's buttons).
    pub id: u32,
    /// The owner name it uses with the table.
    pub name: String,
    /// The key field.
    pub key: String,
    /// The TTL field, in ms.
    pub ttl: String,
    /// The wait field (how long acquire waits), in ms.
    pub wait: String,
    /// The lock kind it asks for: its mode, permits, minimum hold, lock-delay and metadata.
    pub kind: KindFields,
    /// The fence of each lease it holds (or last held), by key.
    pub fences: BTreeMap<String, u64>,
    /// Fields whose text has a lone surrogate: refused, never converted lossily (two different
    /// keys would otherwise become the same key).
    pub unencodable: Vec<Field>,
}

/// The lock-kind fields of a client (as typed), sent with its acquires and steals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindFields {
    /// `exclusive` or `shared`.
    pub mode: String,
    /// How many leases the key allows at once (0: a plain lock).
    pub permits: String,
    /// The minimum hold, in ms (0: none).
    pub min_hold: String,
    /// The lock-delay after an expiry or a steal, in ms (0: none).
    pub lock_delay: String,
    /// Who holds it and why, shown by inspection and query.
    pub metadata: String,
}

impl KindFields {
    /// The fields that ask for these options.
    #[must_use]
    pub fn of(o: &OptionsSpec) -> Self {
        KindFields {
            mode: (if o.mode == ModeName::Shared {
                "shared"
            } else {
                "exclusive"
            })
            .into(),
            permits: o.permits.to_string(),
            min_hold: o.min_hold.to_string(),
            lock_delay: o.lock_delay.to_string(),
            metadata: o.metadata.clone(),
        }
    }
}

impl Default for KindFields {
    /// A plain exclusive lock.
    fn default() -> Self {
        KindFields {
            mode: "exclusive".into(),
            permits: "0".into(),
            min_hold: "0".into(),
            lock_delay: "0".into(),
            metadata: String::new(),
        }
    }
}

/// The refusal of a field whose text cannot be UTF-8 (the npm package's words).
pub const UNENCODABLE: &str = "contains a lone surrogate and cannot be encoded as UTF-8";

/// A client's input field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The key.
    Key,
    /// The TTL.
    Ttl,
    /// How long to wait.
    Wait,
    /// Exclusive or shared.
    Mode,
    /// The key's permits.
    Permits,
    /// The minimum hold.
    MinHold,
    /// The lock-delay.
    LockDelay,
    /// The lease's metadata.
    Metadata,
}

impl Field {
    /// Every field, in the card's order.
    pub const ALL: [Field; 8] = [
        Field::Key,
        Field::Ttl,
        Field::Wait,
        Field::Mode,
        Field::Permits,
        Field::MinHold,
        Field::LockDelay,
        Field::Metadata,
    ];

    /// The field named `name` in the page (`key`, `ttl`, `wait`, `mode`, `permits`,
    /// `min-hold`, `lock-delay`, `metadata`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Its name in the page.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Field::Key => "key",
            Field::Ttl => "ttl",
            Field::Wait => "wait",
            Field::Mode => "mode",
            Field::Permits => "permits",
            Field::MinHold => "min-hold",
            Field::LockDelay => "lock-delay",
            Field::Metadata => "metadata",
        }
    }

    /// Its text in a client.
    fn of(self, c: &mut Client) -> &mut String {
        match self {
            Field::Key => &mut c.key,
            Field::Ttl => &mut c.ttl,
            Field::Wait => &mut c.wait,
            Field::Mode => &mut c.kind.mode,
            Field::Permits => &mut c.kind.permits,
            Field::MinHold => &mut c.kind.min_hold,
            Field::LockDelay => &mut c.kind.lock_delay,
            Field::Metadata => &mut c.kind.metadata,
        }
    }
}

/// What a client can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Take the key if free.
    TryAcquire,
    /// Take the key or wait for it (up to the wait field).
    Acquire,
    /// Release its lease on the key.
    Release,
    /// Extend its lease on the key by the TTL field.
    Extend,
    /// Leave the key's wait queue.
    CancelWait,
    /// Take the key now, whatever its holders (they lose it, told `stolen`).
    Steal,
    /// Write to the protected storage with its fence for the key (not a lock operation).
    Write,
}

impl Action {
    /// The action named `name` in the page.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Action> {
        match name {
            "try-acquire" => Some(Action::TryAcquire),
            "acquire" => Some(Action::Acquire),
            "release" => Some(Action::Release),
            "extend" => Some(Action::Extend),
            "cancel-wait" => Some(Action::CancelWait),
            "steal" => Some(Action::Steal),
            "write" => Some(Action::Write),
            _ => None,
        }
    }
}

/// A field's value was refused before reaching the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The client.
    pub client: u32,
    /// The field.
    pub field: Field,
    /// Why, in plain words.
    pub message: String,
}

/// The whole playground.
pub struct Playground {
    table: LockTable,
    limits: LimitsSpec,
    /// The clock every action is stamped with.
    pub clock: Clock,
    /// The clients, in the order they were added.
    pub clients: Vec<Client>,
    next_client: u32,
    /// Every key the session has used (presets first).
    pub keys: Vec<String>,
    /// Lease history per key.
    pub history: BTreeMap<String, Vec<Segment>>,
    /// Wait history per key.
    pub waits: BTreeMap<String, Vec<WaitSegment>>,
    /// The event log, oldest first.
    pub log: Vec<LogLine>,
    recorded: Vec<Value>,
    /// The imported file being replayed, if any.
    pub replay: Option<Replay>,
    /// The protected resource clients write to with their fencing tokens.
    pub storage: Storage,
    /// The part of the session the timeline shows.
    pub view: TimelineView,
}

/// `12.345 s`: how the playground writes instants and durations.
#[must_use]
pub fn secs(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

/// The number in a field, or a plain-words refusal.
fn whole_ms(text: &str, what: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("{what} must be a whole number of milliseconds"))
}

impl Playground {
    /// A fresh session: default limits, a paused virtual clock at 0, two clients.
    #[must_use]
    pub fn new() -> Self {
        let mut p = Playground {
            table: LockTable::new(lock_core::Limits::default()).expect("default limits are valid"),
            limits: LimitsSpec::default(),
            clock: Clock::new(),
            clients: Vec::new(),
            next_client: 1,
            keys: PRESET_KEYS.iter().map(|k| (*k).to_owned()).collect(),
            history: BTreeMap::new(),
            waits: BTreeMap::new(),
            log: Vec::new(),
            recorded: Vec::new(),
            replay: None,
            storage: Storage::default(),
            view: TimelineView::default(),
        };
        p.add_client();
        p.add_client();
        p
    }

    /// Adds a client named `client-N`; returns its id.
    pub fn add_client(&mut self) -> u32 {
        let id = self.next_client;
        self.next_client += 1;
        self.push_client(id, format!("client-{id}"));
        id
    }

    fn push_client(&mut self, id: u32, name: String) {
        self.clients.push(Client {
            id,
            name,
            key: PRESET_KEYS[0].to_owned(),
            ttl: "3000".into(),
            wait: "5000".into(),
            kind: KindFields::default(),
            fences: BTreeMap::new(),
            unencodable: Vec::new(),
        });
    }

    /// Removes a client. Like a crashed process, it does not release anything: its leases free
    /// themselves at their deadline.
    pub fn remove_client(&mut self, id: u32) {
        if let Some(i) = self.clients.iter().position(|c| c.id == id) {
            let c = self.clients.remove(i);
            let held: Vec<&String> = c.fences.keys().collect();
            let text = if held.is_empty() {
                format!("{} left", c.name)
            } else {
                format!(
                    "{} left without releasing {}: its leases free themselves at their deadline",
                    c.name,
                    held.iter()
                        .map(|k| format!("\"{k}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            self.note(LineKind::Info, text);
        }
    }

    /// The client with this id.
    #[must_use]
    pub fn client(&self, id: u32) -> Option<&Client> {
        self.clients.iter().find(|c| c.id == id)
    }

    /// Stores what was typed into a field and checks it; the error says why it is refused.
    ///
    /// # Errors
    /// A [`FieldError`] in plain words (the core's own message for keys and TTLs).
    ///
    /// `None` is text the page could not convert without loss (a lone surrogate): the field is
    /// refused until it is edited to valid text.
    pub fn set_field(
        &mut self,
        id: u32,
        field: Field,
        value: Option<&str>,
    ) -> Result<(), FieldError> {
        let c = self
            .clients
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| FieldError {
                client: id,
                field,
                message: "no such client".into(),
            })?;
        c.unencodable.retain(|f| *f != field);
        let Some(value) = value else {
            c.unencodable.push(field);
            return self.check_field(id, field).map(|_| ());
        };
        value.clone_into(field.of(c));
        self.check_field(id, field).map(|_| ())
    }

    /// Checks one field of a client: `Ok` carries the parsed number of a numeric field (1 for a
    /// shared mode, else 0).
    ///
    /// # Errors
    /// Why the field is refused.
    pub fn check_field(&self, id: u32, field: Field) -> Result<u64, FieldError> {
        let refuse = |message: String| FieldError {
            client: id,
            field,
            message,
        };
        let c = self
            .client(id)
            .ok_or_else(|| refuse("no such client".into()))?;
        if c.unencodable.contains(&field) {
            return Err(refuse(format!("the {} {UNENCODABLE}", field.name())));
        }
        let limits = self.table.limits();
        match field {
            Field::Key => limits
                .check_key(&c.key)
                .map(|()| 0)
                .map_err(|e| refuse(e.to_string())),
            Field::Ttl => {
                let ttl = whole_ms(&c.ttl, "TTL").map_err(refuse)?;
                limits
                    .check_ttl(lock_core::Duration(ttl))
                    .map(|()| ttl)
                    .map_err(|e| refuse(e.to_string()))
            }
            Field::Wait => whole_ms(&c.wait, "wait").map_err(refuse),
            Field::Mode => match c.kind.mode.as_str() {
                "exclusive" => Ok(0),
                "shared" => Ok(1),
                _ => Err(refuse("the mode is exclusive or shared".into())),
            },
            Field::Permits => (c.kind.permits.trim().parse::<u32>())
                .map(u64::from)
                .map_err(|_| refuse("permits must be a whole number (0: a plain lock)".into())),
            Field::MinHold => whole_ms(&c.kind.min_hold, "the minimum hold").map_err(refuse),
            Field::LockDelay => whole_ms(&c.kind.lock_delay, "the lock-delay").map_err(refuse),
            Field::Metadata => limits
                .check_metadata(&c.kind.metadata)
                .map(|()| 0)
                .map_err(|e| refuse(e.to_string())),
        }
    }

    /// The options a client's kind fields ask for.
    ///
    /// # Errors
    /// The first refused kind field.
    pub fn options(&self, id: u32) -> Result<OptionsSpec, FieldError> {
        let mode = if self.check_field(id, Field::Mode)? == 1 {
            ModeName::Shared
        } else {
            ModeName::Exclusive
        };
        let permits = u32::try_from(self.check_field(id, Field::Permits)?).unwrap_or(u32::MAX);
        let min_hold = self.check_field(id, Field::MinHold)?;
        let lock_delay = self.check_field(id, Field::LockDelay)?;
        self.check_field(id, Field::Metadata)?;
        let metadata = self.client(id).map(|c| c.kind.metadata.clone());
        Ok(OptionsSpec {
            mode,
            permits,
            min_hold,
            lock_delay,
            metadata: metadata.unwrap_or_default(),
            // The page's clients live beside the table: their places are kept for the whole wait.
            wait_alive: 0,
        })
    }

    /// Runs a client's action at the clock's `now`.
    ///
    /// # Errors
    /// The first refused field the action needs; nothing reaches the table then.
    pub fn act(&mut self, id: u32, action: Action) -> Result<(), FieldError> {
        let key_ok = self.check_field(id, Field::Key);
        let c = self.client(id).ok_or(FieldError {
            client: id,
            field: Field::Key,
            message: "no such client".into(),
        })?;
        key_ok?;
        let (key, owner) = (c.key.clone(), c.name.clone());
        let held = c.fences.get(&key).copied();
        let fence = held.unwrap_or(0);
        let now = self.clock.now();
        let op = match action {
            Action::TryAcquire => Op::TryAcquire {
                now,
                key,
                owner,
                ttl: self.check_field(id, Field::Ttl)?,
                options: self.options(id)?,
            },
            Action::Acquire => {
                let ttl = self.check_field(id, Field::Ttl)?;
                let wait = self.check_field(id, Field::Wait)?;
                Op::Acquire {
                    now,
                    key,
                    owner,
                    ttl,
                    wait_deadline: now.saturating_add(wait),
                    options: self.options(id)?,
                }
            }
            Action::Steal => Op::Steal {
                now,
                key,
                owner,
                ttl: self.check_field(id, Field::Ttl)?,
                options: self.options(id)?,
            },
            Action::Release => Op::Release {
                now,
                key,
                owner,
                fence,
            },
            Action::Extend => Op::Extend {
                now,
                key,
                owner,
                fence,
                ttl: self.check_field(id, Field::Ttl)?,
            },
            Action::CancelWait => Op::CancelWait { now, key, owner },
            // Not a lock operation: the storage checks the token the client holds.
            Action::Write => {
                let Some(fence) = held else {
                    return Err(FieldError {
                        client: id,
                        field: Field::Key,
                        message: format!(
                            "{owner} has no fencing token for \"{key}\": acquire it first"
                        ),
                    });
                };
                self.write_storage(&key, &owner, fence);
                return Ok(());
            }
        };
        if let Some(key) = op.key() {
            if !self.keys.iter().any(|k| k == key) {
                self.keys.push(key.to_owned());
            }
        }
        self.perform(&op);
        Ok(())
    }

    /// A clock frame: moves the clock and lets the table apply whatever fell due.
    pub fn tick(&mut self, real_now: f64, real_elapsed: f64) {
        self.clock.tick(real_now, real_elapsed);
        self.service();
    }

    /// Steps the virtual clock by `ms` and applies what fell due.
    pub fn step(&mut self, ms: u64) {
        self.clock.step(ms);
        self.service();
    }

    /// Applies expiries, hand-offs and wait timeouts that are due at the clock's `now` (one
    /// recorded `handle-timeout` step, only when something is due).
    pub fn service(&mut self) {
        let now = self.clock.now();
        if self.table.next_wakeup().is_some_and(|at| at.0 <= now) {
            self.perform(&Op::HandleTimeout { now });
        }
    }

    /// The holder and queue of `key` now (without moving the table's clock).
    pub fn inspect(&mut self, key: &str) -> Option<KeyInfo> {
        let at = self.table.clock();
        self.table.inspect(key, at).ok().flatten()
    }

    /// The keys in use whose names start with `prefix`, with every lease and waiter (Web Locks'
    /// `query()`): at most `limit` keys, without moving the table's clock.
    ///
    /// # Errors
    /// The core's refusal of the prefix, in its words (the table is not asked then).
    pub fn query(&mut self, prefix: &str, limit: usize) -> Result<QueryPage, String> {
        let limit = limit.clamp(1, lock_core::QUERY_MAX);
        (self.table.limits().check_query(prefix, "", limit)).map_err(|e| e.to_string())?;
        let at = self.table.clock();
        self.table
            .query(prefix, "", limit, at)
            .map_err(|e| e.to_string())
    }

    /// When the table next needs waking.
    #[must_use]
    pub fn next_wakeup(&self) -> Option<u64> {
        self.table.next_wakeup().map(|at| at.0)
    }

    /// Runs one operation, records it, and updates the log, the history and the clients.
    fn perform(&mut self, op: &Op) -> (Answer, Vec<EventCase>) {
        let answer = run_on(&mut self.table, op);
        let events: Vec<EventCase> = self
            .table
            .drain_events()
            .map(lock_conformance::native::event)
            .collect();
        self.recorded.push(record::step(op, &answer, &events));
        self.remember_fences(op, &answer, &events);
        self.describe(op, &answer);
        for e in &events {
            self.apply_event(e);
        }
        let mut touched: Vec<String> = events.iter().map(|e| e.key().to_owned()).collect();
        touched.extend(op.key().map(str::to_owned));
        touched.sort();
        touched.dedup();
        for key in touched {
            self.sync_kept(&key);
        }
        (answer, events)
    }

    /// The one place a client's fences change: it learns a fence when granted (directly or by
    /// hand-off), and forgets it once it releases or is told its lease is over. An expiry alone
    /// does not make it forget: like a paused process, it learns at its next release or extend.
    fn remember_fences(&mut self, op: &Op, answer: &Answer, events: &[EventCase]) {
        if let (Some(key), Some(owner)) = (op.key(), op.owner()) {
            let (key, owner) = (key.to_owned(), owner.to_owned());
            let learned = match answer {
                Answer::Result(Ok(Outcome::Acquired { fence, .. })) => Some(Some(*fence)),
                Answer::Result(Ok(Outcome::Released | Outcome::HeldUntil { .. })) => Some(None),
                Answer::Result(Err(
                    ErrorCase::Expired { .. }
                    | ErrorCase::NotHeld
                    | ErrorCase::NotOwner
                    | ErrorCase::Stolen { .. },
                )) if matches!(op, Op::Release { .. } | Op::Extend { .. }) => Some(None),
                _ => None,
            };
            if let (Some(learned), Some(c)) = (learned, self.client_mut(&owner)) {
                match learned {
                    Some(fence) => c.fences.insert(key, fence),
                    None => c.fences.remove(&key),
                };
            }
        }
        for e in events {
            if let EventCase::Granted {
                key, owner, fence, ..
            } = e
            {
                if let Some(c) = self.client_mut(owner) {
                    c.fences.insert(key.clone(), *fence);
                }
            }
        }
    }

    fn client_mut(&mut self, owner: &str) -> Option<&mut Client> {
        self.clients.iter_mut().find(|c| c.name == owner)
    }
}

impl Default for Playground {
    fn default() -> Self {
        Playground::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_conformance::{parse_file, run_loaded, NativeDriver};

    fn acquire_handoff_expire() -> Playground {
        let mut p = Playground::new();
        p.set_field(1, Field::Ttl, Some("1000")).unwrap();
        p.act(1, Action::TryAcquire).unwrap();
        p.act(2, Action::Acquire).unwrap();
        p.act(2, Action::TryAcquire).unwrap(); // already waiting
        p.step(999);
        p.act(2, Action::Release).unwrap(); // not its lease: refused
        p.step(1);
        p.act(1, Action::Release).unwrap(); // too late: expired
        p
    }

    #[test]
    fn the_storage_refuses_a_frozen_holder_that_wakes_after_the_next_holder_wrote() {
        let mut p = Playground::new();
        assert_eq!(
            p.act(1, Action::Write).unwrap_err().message,
            "client-1 has no fencing token for \"job:nightly-report\": acquire it first"
        );
        p.set_field(1, Field::Ttl, Some("1000")).unwrap();
        p.act(1, Action::TryAcquire).unwrap();
        p.act(1, Action::Write).unwrap();
        p.act(2, Action::Acquire).unwrap();
        p.step(1000); // client-1 is frozen past its deadline; client-2 is handed the lock
        p.act(2, Action::Write).unwrap();
        p.act(1, Action::Write).unwrap(); // client-1 wakes and writes with its old fence
        let verdicts: Vec<(&str, u64, bool)> = p
            .storage
            .writes
            .iter()
            .map(|w| (w.owner.as_str(), w.fence, w.accepted))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("client-1", 1, true),
                ("client-2", 2, true),
                ("client-1", 1, false)
            ]
        );
        assert_eq!(p.storage.newest("job:nightly-report"), 2);
        let last = p.log.last().unwrap();
        assert_eq!(last.kind, LineKind::Refused);
        assert!(
            last.text.contains("fence 1 is older than fence 2"),
            "{}",
            last.text
        );
        assert_eq!(
            p.recorded_steps(),
            3,
            "writes are not lock operations: not recorded"
        );
    }

    #[test]
    fn waits_are_remembered_with_how_they_ended() {
        let p = acquire_handoff_expire();
        let waits = &p.waits["job:nightly-report"];
        assert_eq!(waits.len(), 1);
        assert_eq!((waits[0].owner.as_str(), waits[0].start), ("client-2", 0));
        assert_eq!(waits[0].end, Some((1000, WaitEnd::Granted)));
        let mut p = Playground::new();
        p.act(1, Action::TryAcquire).unwrap();
        p.act(2, Action::Acquire).unwrap();
        p.step(100);
        p.act(2, Action::CancelWait).unwrap();
        assert_eq!(
            p.waits["job:nightly-report"][0].end,
            Some((100, WaitEnd::Cancelled))
        );
        let infos = crate::view::key_infos(&mut p);
        let html = crate::view::timeline(&p, &infos);
        assert!(html.contains("wait-seg cancelled"), "{html}");
        assert!(html.contains("client-2 waited from 0.000 s: cancelled at 0.100 s"));
    }

    #[test]
    fn hand_off_at_the_deadline_is_logged_in_plain_words() {
        let p = acquire_handoff_expire();
        let text: Vec<&str> = p.log.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            text,
            [
                "client-1 acquired \"job:nightly-report\": fence 1, until 1.000 s",
                "client-2 waits for \"job:nightly-report\" in place 1, gives up at 5.000 s",
                "client-2 is already waiting for \"job:nightly-report\" (place 1)",
                "client-2 could not release \"job:nightly-report\": key is held by another owner",
                "client-1 lost \"job:nightly-report\": its lease (fence 1) expired at 1.000 s",
                "client-2 was handed \"job:nightly-report\" from the queue: fence 2, until 4.000 s",
                // The lesson: the late holder is told its lease expired (it kept its fence).
                "client-1 could not release \"job:nightly-report\": lease expired at 1.000 s; the lock was lost before this call",
            ]
        );
        assert!(
            p.client(1).unwrap().fences.is_empty(),
            "told, it forgets the fence"
        );
        let exported = p.export();
        let late = exported
            .lines()
            .rfind(|l| l.contains("\"op\":\"release\"") && l.contains("client-1"))
            .unwrap();
        assert!(
            late.contains("\"fence\":1") && late.contains("\"expired\""),
            "{late}"
        );
        let h = &p.history["job:nightly-report"];
        assert_eq!(h[0].end, Some((1000, End::Expired)));
        assert!(h[1].handoff && h[1].end.is_none() && h[1].deadline == 4000);
    }

    /// The session exports as a vector file that the native runner passes unchanged, step for
    /// step.
    pub(super) fn exported_session_passes(p: &Playground) {
        let text = p.export();
        let loaded = parse_file("export.json", &text).expect("strictly valid");
        let report = run_loaded(&mut NativeDriver::default(), &loaded);
        assert!(report.failures.is_empty(), "{report}\n{text}");
        assert_eq!(report.steps, p.recorded_steps());
    }

    #[test]
    fn the_export_is_a_vector_file_that_passes_unchanged() {
        exported_session_passes(&acquire_handoff_expire());
    }

    #[test]
    fn an_imported_file_replays_step_by_step_and_checks_each_step() {
        let mut p = Playground::new();
        let text = acquire_handoff_expire().export();
        p.import("mine.json", &text).unwrap();
        assert!(
            p.clients.is_empty(),
            "clients come from the scenario's owners"
        );
        let mut steps = 0;
        while let Some(ok) = p.replay_step() {
            assert!(ok, "{:?}", p.log.last());
            steps += 1;
            if steps == 1 {
                // The card of the replayed step's client shows its fields (issue 11).
                let c = &p.clients[0];
                assert_eq!(
                    (c.key.as_str(), c.ttl.as_str()),
                    ("job:nightly-report", "1000")
                );
            }
        }
        assert_eq!(steps, 6);
        assert_eq!(p.replay.as_ref().unwrap().failed, 0);
        assert_eq!(p.clients.len(), 2);
        // a wrong expectation is reported, not hidden
        let wrong = text.replace("\"fence\":2", "\"fence\":3");
        p.import("wrong.json", &wrong).unwrap();
        while p.replay_step().is_some() {}
        assert!(p.replay.as_ref().unwrap().failed > 0);
        assert!(p.log.iter().any(|l| l.kind == LineKind::ReplayFail));
        // a malformed file is refused with the loader's reason
        let e = p.import("bad.json", "{\"scenarios\": 1}").unwrap_err();
        assert!(e.starts_with("bad.json: "), "{e}");
    }

    #[test]
    fn bad_fields_are_refused_before_the_table() {
        let mut p = Playground::new();
        let e = p.set_field(1, Field::Ttl, Some("1.5")).unwrap_err();
        assert_eq!(e.message, "TTL must be a whole number of milliseconds");
        assert_eq!(
            p.set_field(1, Field::Ttl, Some("0")).unwrap_err().message,
            "ttl is 0 ms; a lease must last at least 1 ms"
        );
        assert_eq!(
            p.set_field(1, Field::Key, Some("")).unwrap_err().message,
            "key is empty"
        );
        assert!(p.act(1, Action::TryAcquire).is_err());
        // A key with a lone surrogate is refused, not converted (it would collide with U+FFFD).
        p.set_field(1, Field::Ttl, Some("1000")).unwrap();
        let e = p.set_field(1, Field::Key, None).unwrap_err();
        assert_eq!(e.message, format!("the key {UNENCODABLE}"));
        assert!(p.act(1, Action::TryAcquire).is_err());
        p.set_field(1, Field::Key, Some("job")).unwrap();
        p.set_field(1, Field::Ttl, Some("0")).unwrap_err();
        assert_eq!(p.recorded_steps(), 0);
        assert!(p.log.is_empty());
    }

    #[test]
    fn a_removed_client_keeps_its_lease_until_the_deadline() {
        let mut p = Playground::new();
        p.act(1, Action::TryAcquire).unwrap();
        p.remove_client(1);
        assert!(p.inspect("job:nightly-report").is_some());
        p.step(3000);
        assert!(p.inspect("job:nightly-report").is_none());
        assert_eq!(p.log.last().unwrap().kind, LineKind::Lost);
    }
}
