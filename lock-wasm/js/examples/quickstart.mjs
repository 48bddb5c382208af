import { Locks, LockError } from 'expiring-lock';

const locks = new Locks(); // one table, on performance.now()

// Take "nightly-report" for 5 s, waiting at most 1 s if another owner holds it.
const lease = await locks.acquire('nightly-report', {
  ttl: 5_000,
  timeout: 1_000,
  onLost: (info) => console.error(`lost ${info.key} (fence ${info.fence}) at ${info.at} ms`),
});
console.log(`holding nightly-report, fence ${lease.fence}`);

// Meanwhile nobody else gets it.
console.log(`second worker: ${locks.tryAcquire('nightly-report', { ttl: 5_000 }) ?? 'held elsewhere'}`);

// A waiter is handed the lock, first come first served, as soon as it is released.
const next = locks.acquire('nightly-report', { ttl: 5_000, timeout: 1_000 });
lease.release();
console.log(`next holder, fence ${(await next).fence}`);
(await next).release();

// Refusals are LockErrors whose code is the WIT error name.
try {
  locks.tryAcquire('', { ttl: 5_000 });
} catch (error) {
  if (error instanceof LockError) console.log(`refused: ${error.code} (${error.message})`);
}
