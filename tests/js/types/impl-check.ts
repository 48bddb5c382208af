// The implementation, as TypeScript infers it from the JS and its JSDoc, must be assignable to
// the hand-written declarations: a class's members, a method's parameters and return shapes
// cannot drift from index.d.ts. Compiled (never run) by tests/js/declarations.test.js.
import type * as Declared from '../../../lock-wasm/js/index.js';
import * as Impl from '../../../lock-wasm/js/src/api.js';
import type { StoreLease, StoreLocks } from '../../../lock-wasm/js/src/stores/locks.js';

type Assignable<T, U extends T> = U;

export type Tables = Assignable<Declared.LockTable, Impl.LockTable>;
export type LocksInstances = Assignable<Declared.Locks, Impl.Locks>;
export type Leases = Assignable<Declared.Lease, Impl.Lease>;
export type Errors = Assignable<Declared.LockError, Impl.LockError>;
export type Records = Assignable<Declared.KeyRecord, Impl.KeyRecord>;
export const tableStatics: Pick<typeof Declared.LockTable, 'defaultLimits' | 'outcomeTypes' | 'errorCodes'> = Impl.LockTable;
export const waitTimedOut: typeof Declared.WAIT_TIMED_OUT = Impl.WAIT_TIMED_OUT;
export const alreadyWaiting: typeof Declared.ALREADY_WAITING = Impl.ALREADY_WAITING;
export type StoreErrors = Assignable<Declared.StoreError, Impl.StoreError>;
export type StoreLeases = Assignable<Declared.StoreLease, StoreLease>;
export type StoreLocksInstances = Assignable<Declared.StoreLocks, StoreLocks>;
export const open: typeof Declared.Locks.open = Impl.Locks.open;
