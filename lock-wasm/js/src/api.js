// The public API of the package: LockError, LockTable (the core, every call takes `now`),
// Locks / Lease (the same table on the real clock, with waiting, keep-alive and lost-lock
// notification), LockManager (the Web Locks API's shape over a Locks), KeyRecord (one key's record of a shared store, for store clients). Every
// outcome and error is decided by lock-core inside the engine.

export { ALREADY_WAITING, CLOSED, LockError, StoreError, WAIT_TIMED_OUT } from './errors.js';
export { LockTable } from './table.js';
export { Lease, Locks } from './locks.js';
export { LockManager } from './lock-manager.js';
export { Election, TermStopped } from './election.js';
export { KeyRecord } from './records.js';
