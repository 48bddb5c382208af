// Methods the package's classes call on each other, keyed by symbols this module keeps: they
// are not names on the public classes, and the package entry does not export them.

/** `LockTable`: tryAcquire that answers `null` instead of throwing `held`. */
export const TRY_ACQUIRE_OR_NULL = Symbol('tryAcquireOrNull');
/** `Locks`: release a lease of this instance. */
export const RELEASE = Symbol('release');
/** `Locks`: extend a lease of this instance. */
export const EXTEND = Symbol('extend');
/** `Lease`: it was lost (event from the table). */
export const LOSE = Symbol('lose');
/** `Lease`: it ended (released or forgotten). */
export const ENDED = Symbol('ended');
/** `Lease`: the instant keep-alive renews it. */
export const RENEW_AT = Symbol('renewAt');
/** `StoreLease`: release, answering the store's refusal (a LockError) or `null`. */
export const RELEASE_OR_REFUSAL = Symbol('releaseOrRefusal');
/** `StoreLease`: stop its timers (released, lost, or its StoreLocks closed). */
export const STOP = Symbol('stop');
/** A lease's end on this process's clock (a StoreLease's; an in-process lease's is its deadline). */
export const LOCAL_END = Symbol('localEnd');
/** The timer functions a `Locks` runs on (tests inject fakes). */
export const TIMERS = Symbol('timers');
