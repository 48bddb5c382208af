// The playground (web-demo/dist, built by scripts/build-web.sh) and the npm package's browser
// entry, in Debian's Chromium driven by playwright-core, served on 127.0.0.1 only. Nothing is
// fetched from anywhere else. A screenshot is saved to target/browser-artifacts/ (not committed).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { loadKindsVectorFiles, loadVectorFiles } from '../js/lib/vectors.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const artifacts = join(root, 'target/browser-artifacts');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

let server;
let browser;
let base;
let site;

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitForServer(url) {
  for (let i = 0; i < 100; i += 1) {
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the local server did not start at ${url}`);
}

/** A page that records console errors, failed requests and uncaught exceptions. */
async function openPage(path, viewport = { width: 1280, height: 800 }) {
  const page = await browser.newPage({ viewport, acceptDownloads: true });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`exception: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(base) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) problems.push(`off-site request: ${r.url()}`);
  });
  await page.goto(`${base}/${path}`);
  return { page, problems };
}

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  // The site: the playground as built, plus the npm package (as its files whitelist ships it)
  // next to a smoke page for its browser entry.
  site = mkdtempSync(join(tmpdir(), 'playground-site-'));
  cpSync(join(root, 'web-demo/dist'), site, { recursive: true });
  for (const part of ['src', 'engine', 'package.json']) cpSync(join(root, 'lock-wasm/js', part), join(site, 'npm', part), { recursive: true });
  cpSync(join(root, 'tests/browser/npm-smoke.html'), join(site, 'npm-smoke.html'));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', site], { stdio: 'ignore' });
  await waitForServer(`${base}/index.html`);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await browser?.close();
  server?.kill();
  if (site) rmSync(site, { recursive: true, force: true });
});

describe('playground', () => {
  it('runs the shared vectors and the lock kinds\' inside the page against its wasm build', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    await page.click('#run-vectors');
    await page.waitForSelector('#vector-results[data-failed]');
    const failed = await page.getAttribute('#vector-results', 'data-failed');
    const text = await page.textContent('#vector-results');
    assert.equal(failed, '0', text);
    const report = await page.evaluate(() => window.playground.runVectors());
    const files = [...loadVectorFiles(), ...loadKindsVectorFiles()];
    const scenarios = files.reduce((n, f) => n + f.file.scenarios.length, 0);
    const steps = files.reduce((n, f) => n + f.file.scenarios.reduce((m, s) => m + s.steps.length, 0), 0);
    assert.deepEqual(report.failures, []);
    assert.deepEqual([report.files, report.scenarios, report.steps], [files.length, scenarios, steps]);
    assert.equal(text, `${files.length} files, ${scenarios} scenarios, ${steps} steps: all passed`);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('hands a waiting client the lock at the holder deadline on the virtual clock, and exports it', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    const log = () => page.textContent('#log-body');
    // client-1 takes the key for 1 s; client-2 waits for it.
    await page.fill('input[data-client="1"][data-field="ttl"]', '1000');
    await page.click('button[data-client="1"][data-action="try-acquire"]');
    await page.click('button[data-client="2"][data-action="acquire"]');
    await page.waitForFunction(() => document.querySelector('#timeline-body').textContent.includes('client-1 holds it, fence 1'));
    assert.match(await page.textContent('#timeline-body .queue'), /client-2/);
    assert.equal(await page.locator('#timeline-body .wait-seg.waiting').count(), 1, 'the wait is drawn as its own bar');
    assert.match(await log(), /client-2 waits for "job:nightly-report" in place 1/);
    // A bad TTL is refused at the field, before the table.
    await page.fill('input[data-client="2"][data-field="ttl"]', '12.5');
    assert.equal(await page.textContent('#error-2-ttl'), 'TTL must be a whole number of milliseconds');
    assert.equal(await page.getAttribute('input[data-client="2"][data-field="ttl"]', 'aria-invalid'), 'true');
    const lines = await page.locator('#log-body li').count();
    await page.click('button[data-client="2"][data-action="extend"]');
    assert.equal(await page.locator('#log-body li').count(), lines, 'nothing reached the table');
    await page.fill('input[data-client="2"][data-field="ttl"]', '3000');
    assert.equal(await page.textContent('#error-2-ttl'), '');
    // A key with a lone surrogate is refused at the field, never turned into U+FFFD.
    await page.evaluate(() => {
      const input = document.querySelector('input[data-client="2"][data-field="key"]');
      input.value = 'job\ud800';
      input.dispatchEvent(new Event('input', { bubbles: true }));
    });
    assert.equal(await page.textContent('#error-2-key'), 'the key contains a lone surrogate and cannot be encoded as UTF-8');
    await page.click('button[data-client="2"][data-action="extend"]');
    assert.equal(await page.locator('#log-body li').count(), lines, 'nothing reached the table');
    await page.fill('input[data-client="2"][data-field="key"]', 'job:nightly-report');
    assert.equal(await page.textContent('#error-2-key'), '');
    // Step the paused virtual clock to the deadline: 500 ms, then 500 ms.
    await page.selectOption('#step-size', '500');
    await page.click('#clock-step');
    assert.equal(await page.textContent('#clock-now'), '0.500 s');
    assert.doesNotMatch(await log(), /lost/);
    await page.click('#clock-step');
    assert.equal(await page.textContent('#clock-now'), '1.000 s');
    await page.waitForFunction(() => document.querySelector('#timeline-body').textContent.includes('client-2 holds it, fence 2'));
    assert.equal(await page.locator('#timeline-body .wait-seg.granted').count(), 1, 'the wait ended in a hand-off');
    const text = await log();
    assert.match(text, /1\.000 s client-1 lost "job:nightly-report": its lease \(fence 1\) expired at 1\.000 s/);
    assert.match(text, /1\.000 s client-2 was handed "job:nightly-report" from the queue: fence 2, until 4\.000 s/);
    assert.equal(await page.locator('#timeline-body .expiry-mark').count(), 1);
    assert.equal(await page.locator('#timeline-body .handoff-mark').count(), 1);
    assert.equal(await page.textContent('#status-2'), 'holds "job:nightly-report" (fence 2, 3.000 s left)');
    await page.screenshot({ path: join(artifacts, 'playground.png'), fullPage: true });

    // Export: a vector file that the Rust runner accepts unchanged.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    const file = join(artifacts, 'playground-scenario.json');
    await download.saveAs(file);
    const exported = readFileSync(file, 'utf8');
    assert.match(exported, /"granted"/);
    execFileSync('cargo', ['run', '-q', '-p', 'lock-conformance', '--bin', 'lock-vectors', '--', file], { cwd: root, stdio: 'pipe' });

    // The narrow layout (400 px): the timeline comes before the client cards, so it is
    // reachable without scrolling past every client, and no control is wider than the screen.
    await page.setViewportSize({ width: 400, height: 800 });
    const top = async (selector) => (await page.locator(selector).boundingBox()).y;
    assert.ok((await top('#timeline')) < (await top('#clients')), 'timeline before clients');
    assert.ok((await top('#storage')) < (await top('#clients')), 'storage before clients');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow} px wider than the screen`);
    const cut = await page.evaluate(() =>
      [...document.querySelectorAll('.key-name, .client header strong, label, button')]
        .filter((el) => el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1)
        .map((el) => el.textContent.trim()),
    );
    assert.deepEqual(cut, [], 'labels are not cut');
    await page.screenshot({ path: join(artifacts, 'playground-narrow.png'), fullPage: true });
    // Every control shows keyboard focus, and has a name for screen readers.
    await page.focus('button[data-client="1"][data-action="extend"]');
    await page.keyboard.press('Tab'); // keyboard navigation: the focus must show
    const focused = await page.evaluate(() => [document.activeElement.dataset.action, getComputedStyle(document.activeElement).outlineStyle]);
    assert.equal(focused[0], 'cancel-wait');
    assert.notEqual(focused[1], 'none', 'visible focus');
    const unnamed = await page.evaluate(() =>
      [...document.querySelectorAll('button, input, select')]
        .filter((el) => !el.hidden && el.type !== 'hidden')
        .filter((el) => !(el.getAttribute('aria-label') || el.labels?.length || el.textContent.trim()))
        .map((el) => el.outerHTML.slice(0, 80)),
    );
    assert.deepEqual(unnamed, []);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('adds and removes clients, and a new session starts from fresh fields', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    const cards = () => page.locator('[data-client-card]').count();
    assert.equal(await cards(), 2);
    // A typed value does not survive a new session, although the new session has the same
    // clients (client-1, client-2): the cards are rendered again.
    await page.fill('input[data-client="2"][data-field="ttl"]', '1234');
    await page.click('button[data-client="2"][data-action="try-acquire"]');
    await page.click('#clock-step');
    await page.click('button[data-action="reset"]');
    assert.equal(await cards(), 2);
    assert.equal(await page.inputValue('input[data-client="2"][data-field="ttl"]'), '3000');
    assert.equal(await page.textContent('#log-body'), 'Nothing yet.');
    assert.equal(await page.textContent('#clock-now'), '0.000 s');
    await page.click('button[data-action="add-client"]');
    assert.equal(await cards(), 3);
    assert.match(await page.textContent('[data-client-card="3"] header'), /client-3/);
    // client-1 takes the key and leaves without releasing: the lease stays until its deadline.
    await page.click('button[data-client="1"][data-action="try-acquire"]');
    await page.click('button[data-client="1"][data-action="remove"]');
    assert.equal(await cards(), 2);
    assert.match(await page.textContent('#log-body'), /client-1 left without releasing "job:nightly-report"/);
    assert.match(await page.textContent('#timeline-body'), /client-1 holds it, fence 1/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('teaches fencing: a frozen holder is told expired and its stale write is refused (issue 11)', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    const storage = () => page.textContent('#storage-body');
    assert.match(await storage(), /Nothing written yet/);
    // client-1 holds the key for 1 s and writes; client-2 waits for it.
    await page.fill('input[data-client="1"][data-field="ttl"]', '1000');
    await page.click('button[data-client="1"][data-action="try-acquire"]');
    await page.click('button[data-client="1"][data-action="write"]');
    await page.click('button[data-client="2"][data-action="acquire"]');
    // client-1 freezes past its deadline: the virtual clock steps 1 s, client-2 is handed the lock.
    await page.selectOption('#step-size', '1000');
    await page.click('#clock-step');
    await page.waitForFunction(() => document.querySelector('#timeline-body').textContent.includes('client-2 holds it, fence 2'));
    await page.click('button[data-client="2"][data-action="write"]');
    // client-1 wakes: its write with fence 1 is refused, and its release hears "expired".
    await page.click('button[data-client="1"][data-action="write"]');
    await page.click('button[data-client="1"][data-action="release"]');
    assert.match(await storage(), /client-1 wrote "job:nightly-report" with fence 1: refused: older than fence 2/);
    assert.match(await storage(), /newest fence 2/);
    const log = await page.textContent('#log-body');
    assert.match(log, /the storage refused client-1's write to "job:nightly-report": fence 1 is older than fence 2/);
    assert.match(log, /client-1 could not release "job:nightly-report": lease expired at 1\.000 s/);
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('runs the virtual clock at the chosen speed and follows real time in real mode', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    const now = () => page.textContent('#clock-now').then((t) => Number.parseFloat(t));
    // x100 on gloo-timers ticks: two virtual seconds pass in a few tens of real milliseconds.
    await page.selectOption('#clock-speed', '100');
    await page.click('#clock-toggle');
    await page.waitForFunction(() => Number.parseFloat(document.querySelector('#clock-now').textContent) >= 2);
    assert.match(await page.textContent('#clock-state'), /virtual, running at x100/);
    await page.click('#clock-toggle');
    const paused = await now();
    assert.match(await page.textContent('#clock-state'), /virtual, paused/);
    await page.waitForTimeout(200);
    assert.equal(await now(), paused, 'a paused clock does not move');
    // Real mode continues from the virtual instant and moves with real time.
    await page.selectOption('#clock-mode', 'real');
    await page.waitForFunction((from) => Number.parseFloat(document.querySelector('#clock-now').textContent) > from, paused);
    assert.ok((await now()) >= paused);
    assert.equal(await page.getAttribute('#clock-step', 'disabled'), '');
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('shares the session as a link that opens it for replay, and refuses a damaged one (issue 11)', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('input[data-client="1"][data-field="ttl"]', '1000');
    await page.click('button[data-client="1"][data-action="try-acquire"]');
    await page.click('button[data-client="2"][data-action="acquire"]');
    await page.selectOption('#step-size', '1000');
    await page.click('#clock-step');
    await page.click('button[data-client="1"][data-action="release"]');
    await page.click('#share');
    const link = await page.inputValue('#share-link');
    assert.match(link, /#s=[A-Za-z0-9_-]+$/);
    assert.equal(new URL(link).pathname, new URL(page.url()).pathname);
    assert.deepEqual(problems, []);
    await page.close();
    // The link alone opens the session for replay; every step replays as recorded.
    const opened = await openPage(`index.html${new URL(link).hash}`);
    await opened.page.waitForSelector('body[data-ready="true"]');
    await opened.page.waitForFunction(() => document.querySelector('#replay').dataset.state === 'loaded');
    assert.match(await opened.page.textContent('#log-body'), /imported "playground session" from shared link: 4 steps to replay/);
    await opened.page.click('#replay-play');
    await opened.page.waitForFunction(() => document.querySelector('#replay').dataset.state === 'finished', null, { timeout: 20_000 });
    assert.equal(await opened.page.getAttribute('#replay', 'data-failed'), '0');
    assert.match(await opened.page.textContent('#log-body'), /client-1 could not release "job:nightly-report": lease expired/);
    assert.deepEqual(opened.problems, []);
    await opened.page.close();
    const damaged = await openPage(`index.html${new URL(link).hash.slice(0, 40)}`);
    await damaged.page.waitForSelector('body[data-ready="true"]');
    assert.match(await damaged.page.textContent('#import-error'), /damaged/);
    assert.deepEqual(damaged.problems, []);
    await damaged.page.close();
  });

  it('guides a first visit: the tour, dismissed for good, and a guided scenario explained step by step (issue 11)', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    assert.equal(await page.isVisible('#tour'), true, 'the tour shows on a first visit');
    await page.click('#tour-dismiss');
    assert.equal(await page.isVisible('#tour'), false);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    assert.equal(await page.isVisible('#tour'), false, 'and stays dismissed');
    // The guided scenario of the frozen holder, step by step, each step explained.
    const names = await page.$$eval('#guide-select option', (options) => options.map((o) => o.textContent));
    assert.deepEqual(names.slice(1), [
      'contention and FIFO hand-off', 'a frozen holder loses its lock', 'keep-alive', 'a waiter gives up',
      'readers share, a writer waits its turn', 'a semaphore: three permits', 'steal: take it now',
      'minimum hold: a job that finishes early', 'lock-delay after a crash', 'who holds it, and why: metadata and query',
      'leader election: three candidates',
    ]);
    await page.selectOption('#guide-select', '1');
    await page.waitForFunction(() => document.querySelector('#replay').dataset.state === 'loaded');
    assert.match(await page.textContent('#log-body'), /alice stops \(a long GC pause, a stopped VM\) past her deadline/);
    for (let i = 0; i < 4; i += 1) await page.click('#replay-next');
    assert.match(await page.textContent('#log-body'), /step 4: alice wakes and releases with fence 1: expired/);
    await page.click('#replay-next');
    assert.equal(await page.getAttribute('#replay', 'data-state'), 'finished');
    assert.equal(await page.getAttribute('#replay', 'data-failed'), '0');
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('shows the lock kinds: shared holders side by side, a steal, a kept place, the query view, a guide per kind (issue 30)', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    // Two readers: the mode is a select in the card's "Lock kind".
    const openKinds = () => page.$$eval('details.kind', (all) => all.forEach((d) => { d.open = true; }));
    await page.click('article[data-client-card="1"] details.kind summary'); // folded until used
    await openKinds();
    for (const id of ['1', '2']) {
      await page.selectOption(`select[data-client="${id}"][data-field="mode"]`, 'shared');
      await page.fill(`input[data-client="${id}"][data-field="metadata"]`, `reader ${id}`);
      await page.click(`button[data-client="${id}"][data-action="try-acquire"]`);
    }
    assert.equal(await page.textContent('#kind-1'), 'shared, \u201creader 1\u201d', 'the summary follows the fields');
    await page.waitForFunction(() => document.querySelectorAll('#timeline-body .seg.live.shared').length === 2);
    const tops = await page.$$eval('#timeline-body .seg.live.shared', (segs) => segs.map((s) => s.getBoundingClientRect().top));
    assert.notEqual(tops[0], tops[1], 'side by side, in two lanes');
    assert.match(await page.textContent('#timeline-body'), /client-1 holds it shared, fence 1.*client-2 holds it shared, fence 2/);
    // The query view lists both leases with their metadata.
    await page.waitForFunction(() => document.querySelectorAll('#query-body table.held tbody tr').length === 2);
    assert.match(await page.textContent('#query-body'), /client-2shared2.*reader 2/);
    await page.fill('#query-prefix', 'db:');
    await page.waitForFunction(() => /No key in use matches/.test(document.querySelector('#query-body').textContent));
    await page.fill('#query-prefix', '');
    // A bad field is refused beside it, and nothing reaches the table.
    await page.fill('input[data-client="1"][data-field="permits"]', 'many');
    assert.equal(await page.textContent('#error-1-permits'), 'permits must be a whole number (0: a plain lock)');
    await page.fill('input[data-client="1"][data-field="permits"]', '0');
    // A third client steals the key: both readers lose it, told stolen.
    await page.click('button[data-action="add-client"]');
    await page.click('button[data-client="3"][data-action="steal"]');
    await page.waitForFunction(() => document.querySelectorAll('#timeline-body .seg.stolen').length === 2);
    assert.match(await page.textContent('#log-body'), /client-3 stole "job:nightly-report": fence 3/);
    assert.match(await page.textContent('#log-body'), /client-1 lost "job:nightly-report": its lease \(fence 1\) was stolen/);
    // A minimum hold: released early, the place stays taken (hatched) until the minimum.
    await page.click('button[data-client="3"][data-action="release"]');
    await openKinds();
    await page.selectOption('select[data-client="1"][data-field="mode"]', 'exclusive');
    await page.fill('input[data-client="1"][data-field="min-hold"]', '2000');
    await page.click('button[data-client="1"][data-action="try-acquire"]');
    await page.click('button[data-client="1"][data-action="release"]');
    await page.waitForSelector('#timeline-body .seg.kept');
    assert.match(await page.textContent('#timeline-body'), /client-1's place is kept until 2\.000 s \(minimum hold\)/);
    // The session, kinds and all, exports as a vector file the page's own runner accepts.
    const exported = await page.evaluate(() => document.querySelector('#export-count').textContent);
    assert.match(exported, /^\d+ steps recorded$/);
    // Every kind's guided scenario, and the election's, replays to the end with every step as
    // expected.
    for (const index of ['4', '5', '6', '7', '8', '9', '10']) {
      await page.selectOption('#guide-select', index);
      await page.waitForFunction(() => document.querySelector('#replay').dataset.state === 'loaded');
      while ((await page.getAttribute('#replay', 'data-state')) !== 'finished') await page.click('#replay-next');
      assert.equal(await page.getAttribute('#replay', 'data-failed'), '0', `guide ${index}`);
    }
    await page.screenshot({ path: join(artifacts, 'playground-kinds.png'), fullPage: true });
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('pans and zooms the timeline over the whole session, following the clock by default (issue 11)', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    await page.fill('input[data-client="1"][data-field="ttl"]', '1000');
    await page.click('button[data-client="1"][data-action="try-acquire"]');
    await page.selectOption('#step-size', '5000');
    for (let i = 0; i < 3; i += 1) await page.click('#clock-step'); // now 15 s: the lease (0-1 s) scrolled out
    const firstLease = () => page.locator('#timeline-body .seg[data-fence="1"]').count();
    assert.equal(await firstLease(), 0);
    assert.match(await page.textContent('#timeline-window'), /5\.000 s to 25\.000 s \(following the clock/);
    await page.click('button[data-action="pan-back"]');
    await page.click('button[data-action="pan-back"]');
    assert.equal(await firstLease(), 1, 'panned back to the start');
    assert.match(await page.textContent('#timeline-window'), /0\.000 s to 20\.000 s \(panned/);
    await page.click('button[data-action="follow-now"]');
    assert.equal(await firstLease(), 0);
    await page.click('button[data-action="zoom-out"]');
    assert.equal(await firstLease(), 1, 'zoomed out to 40 s: the whole session');
    assert.deepEqual(problems, []);
    await page.close();
  });

  it('imports a vector file and replays it step by step, every step as expected', async () => {
    const { page, problems } = await openPage('index.html');
    await page.waitForSelector('body[data-ready="true"]');
    await page.setInputFiles('#import-file', join(root, 'tests/vectors/waiting.json'));
    await page.waitForFunction(() => document.querySelector('#replay').dataset.state === 'loaded');
    assert.match(await page.textContent('#replay-status'), /"hand-off on release" \(scenario 1 of \d+ in waiting\.json\): step 0 of 6/);
    for (let i = 0; i < 6; i += 1) await page.click('#replay-next');
    assert.equal(await page.getAttribute('#replay', 'data-state'), 'finished');
    assert.equal(await page.getAttribute('#replay', 'data-failed'), '0');
    assert.match(await page.textContent('#log-body'), /client|b was handed "k" from the queue: fence 2/);
    // Another scenario of the same file, played automatically.
    await page.selectOption('#scenario-select', '1');
    await page.click('#replay-play');
    await page.waitForFunction(() => document.querySelector('#replay').dataset.state === 'finished', null, { timeout: 20_000 });
    assert.equal(await page.getAttribute('#replay', 'data-failed'), '0');
    // A malformed file is refused with a readable reason and changes nothing.
    const bad = join(artifacts, 'not-a-vector.json');
    writeFileSync(bad, '{"description": "x", "scenarios": [{"name": "n", "steps": [{"op": "fly", "now": 0}]}]}');
    await page.setInputFiles('#import-file', bad);
    await page.waitForFunction(() => document.querySelector('#import-error').textContent.length > 0);
    assert.match(await page.textContent('#import-error'), /^not imported: not-a-vector\.json: unknown variant `fly`/);
    assert.deepEqual(problems, []);
    await page.close();
  });
});

describe('npm package in the browser', () => {
  it('loads through its browser entry and runs locks and an election with real timers', async () => {
    const { page, problems } = await openPage('npm-smoke.html');
    await page.waitForSelector('#result[data-done]');
    assert.equal(
      await page.textContent('#result'),
      'ok: fence 1, held, handed over with fence 2, lost after 40 ms; election: a resigned, b shut-down, fences increase',
    );
    assert.deepEqual(problems, []);
    await page.close();
  });
});
