// Compiled with `tsc --noEmit` against the installed package (tests/js/package.test.js): the
// hand-written declarations must describe the API as used.
import { KeyRecord, Locks, LockTable, LockError, WAIT_TIMED_OUT, type Lease, type LockEvent, type Granted, type RecordStep } from 'expiring-lock';

const table = new LockTable({ maxKeys: 10 }, { seed: 7 });
const tried = table.tryAcquire('k', 'a', 100, 0);
if (!('fence' in tried)) throw new Error(`${tried.type} at ${tried.position}`); // already waiting
const granted: Granted = tried;
const outcome = table.acquire('k', 'b', 100, 1_000, 1);
if (outcome.type === 'queued') {
  const position: number = outcome.position;
  void position;
}
table.release('k', 'a', granted.fence, 2);
const events: LockEvent[] = table.drainEvents();
for (const e of events) {
  if (e.type === 'granted') console.log(e.deadline);
}
const wake: number | null = table.nextWakeup();
const bytes: Uint8Array = table.snapshot(3);
table.restore(bytes);
void wake;

async function main(): Promise<string> {
  const locks = new Locks({ limits: { maxTtl: 60_000 } });
  const controller = new AbortController();
  try {
    const lease: Lease = await locks.acquire('job', { ttl: 1_000, timeout: 500, signal: controller.signal, keepAlive: true });
    lease.lost.then((info) => console.log(info.at));
    const deadline: number = lease.extend();
    void deadline;
    const released: boolean = lease.release();
    void released;
  } catch (error) {
    if (error instanceof LockError && error.code === WAIT_TIMED_OUT) return 'timed out';
  }
  const maybe: Lease | null = locks.tryAcquire('job', { ttl: 10 });
  void maybe;
  const n: number = await locks.withLock('job', { ttl: 10 }, async (lease) => lease.fence);
  const m = await locks.withLock('job', { ttl: 10, ifAvailable: true }, (lease) => (lease === null ? 0 : lease.fence));
  return String(n + m + locks.stats().liveLeases);
}
void main();

// Explicit resource management: a lease is released, a Locks closed, when its scope ends.
async function scoped(): Promise<number> {
  await using locks = new Locks();
  using maybe = locks.tryAcquire('scoped', { ttl: 10 }); // `using` accepts null
  await using waited = await locks.acquire('other', { ttl: 10 });
  return (maybe?.fence ?? 0) + waited.fence;
}
void scoped();

// A store client's round trip on one key's record: decide, write what changed, then answer.
function recordRoundTrip(stored: Uint8Array | null, fences: number[]): string {
  using record = new KeyRecord(stored, fences);
  const step: RecordStep = record.tryAcquire('job', 'a', 100, 0);
  const written: Uint8Array | null = step.changed ? step.bytes : null;
  const fresh = Array.from({ length: step.freshFences }, (_, i) => 1 + i);
  const answer = record.answer(fresh);
  const events: LockEvent[] = record.events;
  return `${written?.length ?? 0} ${JSON.stringify(answer)} ${events.length} ${step.nextDeadline ?? 'none'}`;
}
void recordRoundTrip(null, []);
