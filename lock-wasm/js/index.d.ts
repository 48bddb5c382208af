// Type declarations of `expiring-lock` (hand-written; checked by `tsc --noEmit` on an example in
// tests/js/types/).

/** Milliseconds: a non-negative integer no larger than `Number.MAX_SAFE_INTEGER`. */
export type Millis = number;

/** The error codes of the core (the WIT contract's `lock-error` names). */
export type LockErrorCode =
  | 'key-empty'
  | 'key-too-long'
  | 'key-invalid'
  | 'owner-empty'
  | 'owner-too-long'
  | 'owner-invalid'
  | 'ttl-zero'
  | 'ttl-too-long'
  | 'deadline-overflow'
  | 'table-full'
  | 'queue-full'
  | 'too-many-waiters'
  | 'held'
  | 'not-owner'
  | 'not-held'
  | 'expired'
  | 'not-waiting'
  | 'invalid-limits'
  | 'snapshot-truncated'
  | 'snapshot-bad-magic'
  | 'snapshot-version'
  | 'snapshot-checksum'
  | 'snapshot-corrupt'
  | 'snapshot-exceeds-limits'
  | 'metadata-too-long'
  | 'metadata-invalid'
  | 'too-many-permits'
  | 'permits-mismatch'
  | 'mode-mismatch'
  | 'min-hold-too-long'
  | 'lock-delay-too-long'
  | 'stolen'
  | 'query-limit';

/** The code of the error that rejects `Locks.acquire` when its wait timed out. */
export declare const WAIT_TIMED_OUT: 'wait-timed-out';
/** The code `Locks.tryAcquire` throws when this owner already waits for the key in a pending `acquire`. */
export declare const ALREADY_WAITING: 'already-waiting';
/** The code of the error of a call on a closed `Locks`, and of the acquires pending when it closed. */
export declare const CLOSED: 'closed';

/**
 * A refused lock request. `code` is the core's error name (or `wait-timed-out` from
 * `Locks.acquire`); `details` holds the error's payload with camelCase names, e.g.
 * `{ deadline }` for `held` and `expired`, `{ len, max }` for `key-too-long`,
 * `{ maxKeys }` for `table-full`, `{ limit }` for `invalid-limits`.
 * Wrong argument types are `TypeError`/`RangeError` instead, thrown before the table is touched.
 */
export declare class LockError extends Error {
  readonly name: 'LockError';
  readonly code: LockErrorCode | typeof WAIT_TIMED_OUT | typeof ALREADY_WAITING | typeof CLOSED;
  readonly details: Record<string, number | string>;
  /** `withLock` whose lease was lost: the value its callback returned (its error is `cause`). */
  readonly result?: unknown;
}

/** A store error's code: the same names as the Rust `StoreError::code`. */
export type StoreErrorCode =
  | 'url'
  | 'not-compiled'
  | 'namespace'
  | 'connect'
  | 'lost'
  | 'schema'
  | 'no-namespace'
  | 'corrupt'
  | 'contention'
  | 'fences-exhausted'
  | 'decider'
  | 'server'
  | 'recovering'
  | 'unreplicated';

/**
 * A shared store could not answer (`Locks.open`'s stores): `connect`, `lost` (no answer within
 * the bound, or the connection failed: a write may or may not have taken effect, and was
 * resolved by reading when it could be), `no-namespace`, `not-compiled` (the store's client
 * package is not installed: the message names it)... Lock refusals are LockErrors, never these.
 */
export declare class StoreError extends Error {
  readonly name: 'StoreError';
  readonly code: StoreErrorCode;
  /**
   * `recovering`: the store's time (ms) from which it grants again. The server took the
   * namespace over (a promoted replica, a restart) and grants nothing for the longest a lease
   * held its place, since a lease granted before may have been lost with its record. A waiting
   * `acquire` waits it out; extensions and releases that grant nothing go on.
   */
  readonly until?: Millis;
}

/** Limits of a table; every field is optional when passed in (the core's default is used). */
export interface Limits {
  /** Longest key, in UTF-8 bytes (default 256). */
  maxKeyBytes: number;
  /** Longest owner, in UTF-8 bytes (default 256). */
  maxOwnerBytes: number;
  /** Longest TTL, in ms (default 86 400 000). */
  maxTtl: Millis;
  /** Most live leases at once (default 1 000 000). */
  maxKeys: number;
  /** Longest wait queue of one key (default 64). */
  maxWaitersPerKey: number;
  /** Most waiters in the table (default 100 000). */
  maxWaiters: number;
  /** How long an expired lease is remembered so its holder hears `expired` (default 600 000 ms). */
  expiredRetention: Millis;
  /** Most expired leases remembered (default 10 000). */
  maxExpiredRecords: number;
  /** Most undrained events kept (default 100 000). */
  maxPendingEvents: number;
  /** Most leases of one key at once, shared or kept; also the most permits (default 64). */
  maxHoldersPerKey: number;
  /** Longest lease metadata, in UTF-8 bytes (default 256). */
  maxMetadataBytes: number;
  /** The table's lock-delay: after an expiry or a steal the place is kept this long (default 0 ms). */
  lockDelay: Millis;
}

/** How a request takes a key. */
export type LockMode = 'exclusive' | 'shared';

/**
 * The lock kinds a `LockTable` request may ask for (each field optional; the defaults are a plain
 * exclusive lease). Every field is checked before anything changes.
 */
export interface RequestOptions {
  /** `'exclusive'` (default) or `'shared'`: beside other shared leases, never beside an exclusive one. */
  mode?: LockMode;
  /** The key's permits: 0 (default) for a plain lock, else at most N leases (fixed by the key's first grant). */
  permits?: number;
  /** The lease keeps its place at least this long after its grant, even if released earlier (ms, at most the TTL). */
  minHold?: Millis;
  /** After the lease expires or is stolen, its place is kept this long past its end (ms). */
  lockDelay?: Millis;
  /** Who holds it and why, shown by inspection, query and events (checked like a key; may be empty). */
  metadata?: string;
}

/**
 * The options of a `LockTable` acquire: the lock kinds, and for a waiter that lives apart from
 * the table, how long its place is kept without a `renewWait`.
 */
export interface TableRequestOptions extends RequestOptions {
  /**
   * Its place in the queue is kept only while it renews it (`renewWait`) within this long (ms),
   * while its wait still ends at the wait deadline it asked for (`WaiterInfo.waitEnd`); 0
   * (default): the place is kept for the whole wait.
   */
  waitAlive?: Millis;
}

/** What `release` did: the lease ended now, or keeps its place until `until` (a minimum hold). */
export type ReleaseOutcome = { type: 'released' } | { type: 'held-until'; until: Millis };

/** A lease granted now (`acquired`) or the caller's existing lease (`already-held`). */
export interface Granted {
  type: 'acquired' | 'already-held';
  /** Fencing token: strictly greater than every token the table issued before. */
  fence: number;
  /** The lease is live while `now < deadline`. */
  deadline: Millis;
}

/** The caller is in the key's FIFO queue (`position` 1 is next). */
export interface Queued {
  type: 'queued' | 'already-waiting';
  position: number;
}

/** What `tryAcquire`/`acquire` did. */
export type AcquireOutcome = Granted | Queued;

/** A time-driven or hand-off notification. `at` is when it happened. */
export type LockEvent =
  | { type: 'expired'; key: string; owner: string; fence: number; metadata: string; at: Millis }
  | { type: 'granted'; key: string; owner: string; fence: number; deadline: Millis; mode: LockMode; metadata: string; at: Millis }
  | { type: 'wait-timed-out'; key: string; owner: string; at: Millis }
  | { type: 'stolen'; key: string; owner: string; fence: number; metadata: string; at: Millis };

/** A waiter of a key. */
export interface WaiterInfo {
  owner: string;
  ttl: Millis;
  /** It keeps its place while `now < waitDeadline`. */
  waitDeadline: Millis;
  /** The end of the wait it asked for: `waitDeadline`, or later for a waiter that keeps its place by renewals (`waitAlive`). */
  waitEnd: Millis;
  mode: LockMode;
  metadata: string;
}

/** One lease of a key. */
export interface HolderInfo {
  owner: string;
  fence: number;
  /** Its deadline (for an ended lease: when it stops taking its place). */
  deadline: Millis;
  mode: LockMode;
  metadata: string;
  /** The end of its minimum hold, or `null`. */
  minUntil: Millis | null;
  /** Set when it ended for its holder but still takes its place until `deadline`. */
  ended: 'released' | 'expired' | 'stolen' | null;
  /** When it was granted (acquire, hand-off or steal; extensions keep it); `null` for a lease restored from a snapshot or record written before grant instants were kept. */
  grantedAt: Millis | null;
}

/** A key in use: its first lease's `owner`, `fence` and `deadline`, every lease, the queue. */
export interface KeyInfo {
  owner: string;
  fence: number;
  deadline: Millis;
  /** Every lease, in grant order (one for a key held exclusively). */
  holders: HolderInfo[];
  waiters: WaiterInfo[];
  /** The key's permits (0: a plain lock). */
  permits: number;
}

/** One page of `LockTable.query`. */
export interface QueryPage {
  /** Keys in byte order. */
  keys: Array<{ key: string; info: KeyInfo }>;
  /** The cursor of the next page (pass it as `after`), or `null`. */
  next: string | null;
}

/** Counters and gauges of a table. */
export interface Stats {
  liveLeases: number;
  waiters: number;
  expiredRecords: number;
  pendingEvents: number;
  clock: Millis;
  lastFence: number;
  acquired: number;
  handedOff: number;
  released: number;
  extended: number;
  expired: number;
  queued: number;
  waitTimedOut: number;
  cancelled: number;
  rejected: number;
  eventsDropped: number;
  /** Leases ended by a steal. */
  stolen: number;
}

/**
 * The lock table of lock-core. Every call takes `now` (integer ms of a monotonic clock you own),
 * so the same calls give the same answers on every runtime. Errors are `LockError`s; a call that
 * throws one changes nothing (time-driven changes up to `now` still apply).
 *
 * @example
 * const table = new LockTable();
 * const { fence } = table.tryAcquire('job', 'worker-1', 30_000, 0) as Granted;
 * table.release('job', 'worker-1', fence, 1_000);
 */
export declare class LockTable {
  constructor(limits?: Partial<Limits>, options?: { seed?: number });
  /** The core's default limits. */
  static defaultLimits(): Limits;
  /** Every acquire outcome `type`, in the core's order. */
  static outcomeTypes(): Array<AcquireOutcome['type']>;
  /** Every LockError `code` the core can answer, in the core's order. */
  static errorCodes(): LockErrorCode[];
  /** This table's limits. */
  readonly limits: Limits;
  /**
   * Takes `key` for `ttl` ms if free (`acquired`, or `already-held` by this owner); throws `held`
   * (with `details.deadline`) otherwise. Never queues: an owner already waiting for the key gets
   * `already-waiting` with its place.
   */
  tryAcquire(key: string, owner: string, ttl: Millis, now: Millis, options?: TableRequestOptions): AcquireOutcome;
  /**
   * Takes `key`, or queues `owner` until the absolute instant `waitDeadline`. A request is granted
   * at once only if it fits and nobody waits ahead of it (FIFO, whatever the mode).
   */
  acquire(key: string, owner: string, ttl: Millis, waitDeadline: Millis, now: Millis, options?: TableRequestOptions): AcquireOutcome;
  /**
   * Takes `key` now whatever its holders: each live lease ends with a `stolen` event and its
   * holder's next call throws `stolen`; the queue is kept. Exclusive only.
   */
  steal(key: string, owner: string, ttl: Millis, now: Millis, options?: RequestOptions): Granted;
  /** Ends the lease; the first waiter is handed the lock (a `granted` event), now or at `until`. */
  release(key: string, owner: string, fence: number, now: Millis): ReleaseOutcome;
  /** Pushes the deadline to `now + ttl`. */
  extend(key: string, owner: string, fence: number, ttl: Millis, now: Millis): { fence: number; deadline: Millis };
  /** Leaves the key's wait queue. */
  cancelWait(key: string, owner: string, now: Millis): void;
  /** Keeps a waiter's place alive: its wait deadline moves to `waitDeadline` if later. */
  renewWait(key: string, owner: string, waitDeadline: Millis, now: Millis): AcquireOutcome;
  /** Applies expiries, hand-offs and wait timeouts due at or before `now`. */
  handleTimeout(now: Millis): void;
  /** When `handleTimeout` next has work, or `null`. */
  nextWakeup(): Millis | null;
  /** Number of undrained events. */
  readonly pendingEvents: number;
  /** Every undrained event, oldest first. */
  drainEvents(): LockEvent[];
  /** The holder and queue of `key`, or `null` if it is free. */
  inspect(key: string, now: Millis): KeyInfo | null;
  /** Keys in use with `prefix` after `after` (byte order), at most `limit` (1 to 1000, default 100). */
  query(now: Millis, options?: { prefix?: string; after?: string; limit?: number }): QueryPage;
  /** Applies at most `maxChanges` due changes (a host's recovery); `true` if more are due. */
  handleTimeoutBounded(now: Millis, maxChanges: number): boolean;
  /** Every later fence is above `floor`. */
  raiseFenceFloor(floor: number): void;
  /** Takes every waiter out of every queue (no events); returns how many. */
  cancelAllWaits(now: Millis): number;
  /** Counters and gauges at `now`. */
  stats(now: Millis): Stats;
  /** The table's state as bytes. */
  snapshot(now: Millis): Uint8Array;
  /**
   * Loads a snapshot; a corrupt one throws a `snapshot-*` LockError, one holding a fence or an
   * instant past `Number.MAX_SAFE_INTEGER` a RangeError; either changes nothing.
   */
  restore(bytes: Uint8Array): void;
  /** Frees the table's memory; later calls throw. */
  free(): void;
}

/** What a lost lease reports. */
/** What one operation on a `KeyRecord` did to the record. */
export interface RecordStep {
  /** The record changed: its answer holds only once `bytes` are written back with compare-and-set. */
  changed: boolean;
  /** How many fresh fencing tokens that write must allocate, in order. */
  freshFences: number;
  /** The record to write (when `changed`); `null`: it holds nothing, delete it. */
  bytes: Uint8Array | null;
  /** The latest instant applied to the key. */
  clock: Millis;
  /** The key's next change by time alone. */
  nextDeadline: Millis | null;
  /** When a free record holds nothing any more and may be collected. */
  forgetAt: Millis | null;
}

/** What a `KeyRecord` holds (see `KeyRecord.state`). */
export interface RecordState {
  lease: { owner: string; fence: number; deadline: Millis } | null;
  waiters: number;
  nextDeadline: Millis | null;
  expiredRecords: number;
}

/**
 * One key's record of a shared store, decided by lock-core (the component's `records`
 * interface): load the stored bytes, run one operation, write `bytes` back with compare-and-set
 * if `changed` (allocating `freshFences` tokens), then `answer(tokens)`.
 */
export declare class KeyRecord {
  /** Throws a `snapshot-*` LockError if `stored` does not decode. */
  constructor(stored?: Uint8Array | null, fences?: number[], limits?: Partial<Limits>);
  tryAcquire(key: string, owner: string, ttl: Millis, now: Millis): RecordStep;
  acquire(key: string, owner: string, ttl: Millis, waitDeadline: Millis, now: Millis): RecordStep;
  release(key: string, owner: string, fence: number, now: Millis): RecordStep;
  extend(key: string, owner: string, fence: number, ttl: Millis, now: Millis): RecordStep;
  cancelWait(key: string, owner: string, now: Millis): RecordStep;
  renewWait(key: string, owner: string, waitDeadline: Millis, now: Millis): RecordStep;
  handleTimeout(key: string, now: Millis): RecordStep;
  inspect(key: string, now: Millis): RecordStep;
  /**
   * The last operation's answer once written (`fresh`: the tokens the store allocated), shaped
   * as `LockTable`'s answer to the same call; throws its LockError.
   */
  answer(fresh?: number[]): AcquireOutcome | ReleaseOutcome | { fence: number; deadline: Millis } | KeyInfo | null | undefined;
  /**
   * What the record holds at `now`, without changing it: its lease, its waiters' count, its
   * next change by time alone, the expired leases it still remembers at `now`.
   */
  state(now: Millis): RecordState;
  /** The key's events of the last answer, oldest first. */
  events: LockEvent[];
  /** Frees the engine's memory for this record. */
  free(): void;
  [Symbol.dispose](): void;
}

export interface LostInfo {
  key: string;
  owner: string;
  fence: number;
  /** When it ended: its deadline, or the instant it was stolen. */
  at: Millis;
  /** Why: it ran out (`expired`), or another owner took the key by force (`stolen`). */
  reason: 'expired' | 'stolen';
}

/** Options of a lease request. */
export interface LeaseOptions {
  /** How long the lease lasts unless extended, in ms. */
  ttl: Millis;
  /** Who holds it; default: a fresh owner per request (each request is its own contender). */
  owner?: string;
  /** Extend the lease automatically (when a third of its TTL is left) until it is released. */
  keepAlive?: boolean;
  /** Called once if the lease expires before it is released. */
  onLost?: (info: LostInfo) => void;
}

/** Options of a waiting request. */
export interface AcquireOptions extends LeaseOptions {
  /** Give up after this many ms (rejects with `wait-timed-out`); default: wait without limit. */
  timeout?: Millis;
  /** Give up when this signal aborts (rejects with `signal.reason`). */
  signal?: AbortSignal;
}

/** Options of `withLock`. */
export interface WithLockOptions extends AcquireOptions {
  /** Do not wait: the callback gets `null` if the key is held. */
  ifAvailable?: boolean;
}

/** A lease held through `Locks`. */
export declare class Lease {
  private constructor();
  readonly key: string;
  readonly owner: string;
  /** Fencing token: pass it with every write to the protected resource. */
  readonly fence: number;
  /** The current deadline (moves with `extend` and keep-alive). */
  readonly deadline: Millis;
  /** Not released and not lost. */
  readonly held: boolean;
  /** The lease ran out before it was released. */
  readonly isLost: boolean;
  /** Resolves once, when the lease expires; never if it is released first. */
  readonly lost: Promise<LostInfo>;
  /** Aborts (reason: a LockError `expired`) when the lease is lost. */
  readonly signal: AbortSignal;
  /** Pushes the deadline to now + `ttl` (default: the lease's TTL); returns the new deadline. */
  extend(ttl?: Millis): Millis;
  /** Releases the lease: `true` if this call released it, `false` if it was already released or lost. */
  release(): boolean;
  /** `using lease = ...`: releases when the scope ends (TypeScript 5.2+, lib `esnext.disposable`). */
  [Symbol.dispose](): void;
  /** `await using lease = ...`: releases when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Options of `locks.election(name, options)` (docs/election.md). */
export interface ElectionOptions {
  /** The term's lease TTL (extended every third of it while it leads). */
  ttl: Millis;
  /** This candidate's id (the lease's owner; default: one of the instance's). */
  candidate?: string;
  /** The stop signal aborts at the latest this long before the lease's end on this process's clock (default: a fifth of the TTL; more than 0, at most half). */
  margin?: Millis;
  /** How long the body may take to settle after its stop signal (default: the margin); then its lease is released anyway. */
  grace?: Millis;
  /** The pause after a failed campaign or extension (default: a tenth of the TTL, at most 1 s). */
  retry?: Millis;
  /** Lead one term, then `run` resolves (default: campaign again after each term). */
  once?: boolean;
  /** Shown to every reader of the leader (an address, say). */
  metadata?: string;
  /** Aborting it shuts the campaign down (as `shutDown()`). */
  signal?: AbortSignal;
}

/** A term, as the leader's body sees it. */
export interface Term {
  /** The election. */
  name: string;
  /** This candidate. */
  candidate: string;
  /** The term's fencing token: pass it with every write. */
  fence: number;
  /** Aborts (with a `TermStopped`) before the lease can have ended on this process's clock, when it is lost, or when the candidate resigns or shuts down. */
  signal: AbortSignal;
}

/** The leader of an election, read from its key. */
export interface Leader {
  candidate: string;
  /** Its term's fence. */
  fence: number;
  /** When its term began: its lease's grant, in the lock's time (`null` only for a lease restored from a format that predates grant instants). */
  since: Millis | null;
  /** Its lease's deadline (it extends it while it leads). */
  deadline: Millis;
  metadata: string;
}

/** Why a term stopped: the stop signal's `reason`. */
export declare class TermStopped extends Error {
  constructor(code: TermStopped['code'], fence: number);
  readonly name: 'TermStopped';
  /** `returned`, `lost`, `unrenewed`, `resigned` or `shut-down`. */
  readonly code: 'returned' | 'lost' | 'unrenewed' | 'resigned' | 'shut-down';
  readonly fence: number;
}

/** One candidate of an election (`locks.election(name, options)`). */
export declare class Election {
  private constructor();
  /** Campaigns until shut down (or one term with `once`), running `body` for each term; resolves with how many terms it led. A body that throws ends the campaign with its error. If its `Locks` is closed under it, the term's signal aborts (`shut-down`) and `run` rejects with LockError `closed`. */
  run(body: (term: Term) => unknown): Promise<number>;
  /** Ends the current term: its signal aborts; once the body settles the next candidate in line leads. It stays a candidate. */
  resign(): void;
  /** Leaves the election: the current term ends as by `resign`, then `run` resolves. */
  shutDown(): void;
}

/** Options of `new Locks()`. */
export interface LocksOptions {
  limits?: Partial<Limits>;
  /** Hash seed of the table. */
  seed?: number;
  /** The clock, in integer ms, monotonic. Default: `Math.floor(performance.now())`. */
  now?: () => Millis;
  /** Timer functions (tests inject fakes). */
  setTimeout?: (callback: () => void, delay: number) => unknown;
  clearTimeout?: (handle: any) => void;
}

/**
 * A lock table on a real clock: waiting with Promises, leases that notify when lost, keep-alive,
 * and one timer for the whole table (cleared when nothing is pending, so Node can exit).
 *
 * @example
 * const locks = new Locks();
 * const lease = await locks.acquire('report', { ttl: 10_000, timeout: 2_000 });
 * try { await writeReport(lease.fence); } finally { lease.release(); }
 */
export declare class Locks {
  constructor(options?: LocksOptions);
  /**
   * Opens `namespace` of a shared store (Node only): `redis://` or `rediss://` (the optional peer
   * dependency `ioredis`), `postgres://` or `postgresql://` (`pg`), `mysql://` or `mariadb://`
   * (`mysql2`), `sqlite://PATH` (`better-sqlite3`). TLS parameters as the Rust clients take them
   * (`rediss://...?cacert=&cert=&key=`, `sslmode=&sslrootcert=&sslcert=&sslkey=`,
   * `ssl-mode=&ssl-ca=&ssl-cert=&ssl-key=`); the server's certificate is always checked. Every
   * process and machine that opens it shares its locks, Node and Rust replicas alike; rejects
   * with a StoreError.
   */
  static open(url: string, namespace: string, options?: StoreOptions): Promise<StoreLocks>;
  /** The underlying table (calls on it bypass the waiter and lease bookkeeping). */
  readonly table: LockTable;
  /** The clock reading this instance uses. */
  now(): Millis;
  /**
   * Takes `key` now if it is free, or answers `null`; with `retryAt: true`, `{ retryAt }` (the
   * holder's deadline: the earliest instant a retry can succeed) instead of `null`.
   */
  tryAcquire(key: string, options: LeaseOptions & RequestOptions & { retryAt: true }): Lease | { retryAt: Millis };
  tryAcquire(key: string, options: LeaseOptions & RequestOptions & { retryAt?: false }): Lease | null;
  /** Takes `key`, waiting in its FIFO queue until handed over (or timeout / abort). */
  acquire(key: string, options: AcquireOptions & RequestOptions): Promise<Lease>;
  /**
   * Takes `key` now whatever its holders: each holder's lease is lost with `reason: 'stolen'`;
   * the queue is kept. Exclusive only.
   */
  steal(key: string, options: LeaseOptions & RequestOptions): Lease;
  /** The keys in use with `prefix` after `after`, at most `limit` (1 to 1000, default 100). */
  query(options?: { prefix?: string; after?: string; limit?: number }): QueryPage;
  /**
   * Runs `callback` holding `key`; releases when it settles. Rejects with a LockError `expired`
   * (or `stolen`) if the lease was lost before the callback settled (its value as `result`, its
   * error as `cause`).
   */
  withLock<T>(key: string, options: WithLockOptions & RequestOptions & { ifAvailable: true }, callback: (lease: Lease | null) => T | Promise<T>): Promise<T>;
  withLock<T>(key: string, options: WithLockOptions & RequestOptions, callback: (lease: Lease) => T | Promise<T>): Promise<T>;
  /** The leases and queue of `key` now. */
  inspect(key: string): KeyInfo | null;
  /** A candidate of the election `name` (docs/election.md). */
  election(name: string, options: ElectionOptions): Election;
  /** The leader of the election `name`, or `null`. */
  leader(name: string): Leader | null;
  /** Counters and gauges now. */
  stats(): Stats;
  /** Stops the timer, rejects pending acquires, frees the table. */
  close(): void;
  /** `using locks = new Locks()`: closes when the scope ends. */
  [Symbol.dispose](): void;
  /** `await using locks = new Locks()`: closes when the scope ends. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Options of `Locks.open`. */
export interface StoreOptions {
  /** The most one call may take, in ms (its reads, writes and re-reads together). Default 5 000. */
  bound?: Millis;
  limits?: Partial<Limits>;
  /** How often a waiter looks by itself when the store sends no hand-off notices, in ms. Default 50. */
  poll?: Millis;
}

/**
 * A lease held through a shared store (`Locks.open`): as `Lease`, asynchronous. Its holder
 * stops believing in it (`held` false, `lost` resolves, `signal` aborts, `onLost` runs) at the
 * first instant the store's clock may have reached its deadline, before any other client can be
 * handed the key.
 */
export interface StoreLease {
  readonly key: string;
  readonly owner: string;
  /** Fencing token: pass it with every write to the protected resource. */
  readonly fence: number;
  /** The current deadline, in the store's time (moves with `extend` and keep-alive). */
  readonly deadline: Millis;
  /** When the released lease ends, in the store's time (`null` before): the release's instant, or the end of its minimum hold (it keeps its place until then). */
  readonly releasedAt: Millis | null;
  /** Not released and not lost (read from this process's clock at each call). */
  readonly held: boolean;
  readonly isLost: boolean;
  readonly lost: Promise<LostInfo>;
  readonly signal: AbortSignal;
  /** Pushes the deadline to the store's now + `ttl`; resolves with the new deadline. */
  extend(ttl?: Millis): Promise<Millis>;
  /** `true` if this call released it, `false` if it was already released or lost. */
  release(): Promise<boolean>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Locks over a shared store (`Locks.open`): as `Locks`, asynchronous. */
export interface StoreLocks {
  /** The store's URL (without password) and the namespace. */
  readonly store: string;
  tryAcquire(key: string, options: LeaseOptions & RequestOptions): Promise<StoreLease | null>;
  acquire(key: string, options: AcquireOptions & RequestOptions): Promise<StoreLease>;
  /** Takes `key` now whatever its holders, in every process (they lose it: `reason: 'stolen'`). */
  steal(key: string, options: LeaseOptions & RequestOptions): Promise<StoreLease>;
  /** The keys in use with `prefix` after `after`, at most `limit` (1 to 1000, default 100). */
  query(options?: { prefix?: string; after?: string; limit?: number }): Promise<QueryPage>;
  withLock<T>(key: string, options: WithLockOptions & RequestOptions & { ifAvailable: true }, callback: (lease: StoreLease | null) => T | Promise<T>): Promise<T>;
  withLock<T>(key: string, options: WithLockOptions & RequestOptions, callback: (lease: StoreLease) => T | Promise<T>): Promise<T>;
  /**
   * The holder and waiters of `key` at the store's time (`null`: free). Creates nothing: in a
   * namespace that was never written it rejects with a `StoreError` `no-namespace`.
   */
  inspect(key: string): Promise<KeyInfo | null>;
  /** A candidate of the election `name` among every replica (docs/election.md). */
  election(name: string, options: ElectionOptions): Election;
  /** The leader of the election `name`, or `null` (rejects like `inspect`). */
  leader(name: string): Promise<Leader | null>;
  /** Every key of the namespace with a record, in byte order (none if it was never written). */
  keys(): Promise<string[]>;
  /** Stops every lease's timers and closes the connections. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The lock a `LockManager.request` callback holds (Web Locks' `Lock`, with our additions). */
export interface HeldLock {
  /** The lock's name (the key). */
  readonly name: string;
  readonly mode: LockMode;
  /** The lease's fencing token: pass it with every write to what the lock protects. */
  readonly fence: number;
  /** Who holds it (a fresh owner per request unless `owner` was given). */
  readonly owner: string;
  /** The lease's deadline now (it moves while the callback runs: the lease is kept alive). */
  readonly deadline: Millis;
  /** Aborts (reason: a LockError `stolen` or `expired`) if the lock is lost. */
  readonly signal: AbortSignal;
}

/** Options of `LockManager.request`: the Web Locks ones, then ours. */
export interface LockRequestOptions extends RequestOptions {
  /** Do not wait: the callback gets `null` unless the lock is granted at once. */
  ifAvailable?: boolean;
  /** Take the lock now whatever its holders (they lose it); exclusive only. */
  steal?: boolean;
  /** Abort the wait (rejects with `signal.reason`). */
  signal?: AbortSignal;
  /** The lease's TTL, kept alive while the callback runs (default: the manager's, 30 s). */
  ttl?: Millis;
  /** Who holds it (default: a fresh owner per request). */
  owner?: string;
  /** Called once if the lock is lost before the callback settles. */
  onLost?: (info: LostInfo) => void;
}

/** One entry of `LockManager.query()` (Web Locks' `LockInfo`, plus the fence and metadata). */
export interface LockInfo {
  name: string;
  mode: LockMode;
  /** The owner. */
  clientId: string;
  /** The lease's fencing token (held locks only). */
  fence?: number;
  metadata: string;
}

/**
 * The Web Locks API's shape (`navigator.locks`) over a `Locks` (one process) or a `StoreLocks`
 * (`await Locks.open(url, namespace)` in Node: replicas sharing a store): `request(name,
 * [options,] callback)` holds the lock while the callback's promise is pending; `query()`. Rejects with a
 * LockError `stolen` or `expired` if the lock was lost before the callback settled (Web Locks
 * rejects a stolen holder's request with an `AbortError`); invalid combinations of options are a
 * `NotSupportedError` DOMException, as in browsers.
 */
export declare class LockManager {
  constructor(options?: { locks?: Locks | StoreLocks; ttl?: Millis });
  /** The `Locks` or `StoreLocks` this manager requests from. */
  readonly locks: Locks | StoreLocks;
  request<T>(name: string, callback: (lock: HeldLock) => T | Promise<T>): Promise<T>;
  request<T>(name: string, options: LockRequestOptions & { ifAvailable: true }, callback: (lock: HeldLock | null) => T | Promise<T>): Promise<T>;
  request<T>(name: string, options: LockRequestOptions, callback: (lock: HeldLock) => T | Promise<T>): Promise<T>;
  /** What is held and what waits. */
  query(): Promise<{ held: LockInfo[]; pending: LockInfo[] }>;
}
