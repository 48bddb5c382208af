// The package as users get it: `npm pack`, install the tarball into a fresh project, import it from
// Node (ESM) and run the README's quickstart; type-check an example against the installed types.
import { it, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const pkg = join(root, 'lock-wasm/js');
let project;
let packed;

before(() => {
  project = mkdtempSync(join(tmpdir(), 'expiring-lock-user-'));
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', project], { cwd: pkg, encoding: 'utf8' });
  packed = JSON.parse(out)[0];
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline', join(project, packed.filename)], { cwd: project, stdio: 'pipe' });
});

it('ships only the whitelisted files', () => {
  const files = packed.files.map((f) => f.path).sort();
  assert.deepEqual(files, [
    'LICENSE-APACHE',
    'LICENSE-MIT',
    'README.md',
    'engine/lock_wasm.js',
    'engine/lock_wasm_bg.wasm',
    'index.d.ts',
    'package.json',
    'src/api.js',
    'src/browser.js',
    'src/election.js',
    'src/engine.js',
    'src/errors.js',
    'src/internal.js',
    'src/lock-manager.js',
    'src/locks.js',
    'src/loss.js',
    'src/node.js',
    'src/records.js',
    'src/stores/client.js',
    'src/stores/io.js',
    'src/stores/locks.js',
    'src/stores/mysql.js',
    'src/stores/notices.js',
    'src/stores/open.js',
    'src/stores/postgres.js',
    'src/stores/redis.js',
    'src/stores/sqlite.js',
    'src/stores/steps.js',
    'src/stores/tls.js',
    'src/table.js',
    'steps/README.md',
    'steps/mysql.sql',
    'steps/postgres.sql',
    'steps/redis-cas.lua',
    'steps/sqlite.sql',
  ]);
});

it('declares each store client as an optional peer, the version tested here', async () => {
  const { SCHEMES } = await import('../../lock-wasm/js/src/stores/open.js');
  const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));
  const dev = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).devDependencies;
  const clients = [...new Set(Object.values(SCHEMES).map((s) => s.peer))].sort();
  assert.deepEqual(Object.keys(manifest.peerDependencies).sort(), clients);
  for (const name of clients) {
    assert.equal(manifest.peerDependenciesMeta[name]?.optional, true, `${name} is optional`);
    assert.equal(manifest.peerDependencies[name], `^${dev[name]}`, `${name}: the range starts at the version the tests run`);
  }
  // A user of the in-process table installs none of them.
  for (const name of clients) assert.ok(!readdirSync(join(project, 'node_modules')).includes(name), `${name} was installed with the package`);
});

it('runs the README quickstart from the installed tarball', () => {
  copyFileSync(join(pkg, 'examples/quickstart.mjs'), join(project, 'quickstart.mjs'));
  const output = execFileSync('node', ['quickstart.mjs'], { cwd: project, encoding: 'utf8', timeout: 30_000 });
  assert.equal(
    output,
    [
      'holding nightly-report, fence 1',
      'second worker: held elsewhere',
      'next holder, fence 2',
      'refused: key-empty (key is empty)',
      '',
    ].join('\n'),
  );
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  assert.ok(readme.includes(readFileSync(join(pkg, 'examples/quickstart.mjs'), 'utf8')), 'the README shows the tested quickstart verbatim');
});

it('runs an election from the installed tarball: a resignation hands over, both leave', () => {
  const script = `import { Locks, TermStopped } from 'expiring-lock';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const locks = new Locks();
const seen = [];
const body = (who) => async ({ fence, signal }) => {
  seen.push(\`\${who} leads with fence \${fence}\`);
  await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  seen.push(\`\${who} stops: \${signal.reason.code} \${signal.reason instanceof TermStopped}\`);
};
const a = locks.election('scheduler', { candidate: 'a', ttl: 1000 });
const b = locks.election('scheduler', { candidate: 'b', ttl: 1000 });
const runA = a.run(body('a'));
while (seen.length === 0) await sleep(5);
const runB = b.run(body('b'));
while ((await locks.inspect('scheduler')).waiters.length === 0) await sleep(5);
a.resign();
while (seen.length < 3) await sleep(5);
a.shutDown();
const ledA = await runA;
b.shutDown();
console.log(seen.concat([\`terms \${ledA} \${await runB}\`, \`leader \${JSON.stringify(await locks.leader('scheduler'))}\`]).join('\\n'));
`;
  writeFileSync(join(project, 'election.mjs'), script);
  const output = execFileSync('node', ['election.mjs'], { cwd: project, encoding: 'utf8', timeout: 30_000 });
  assert.equal(
    output,
    ['a leads with fence 1', 'a stops: resigned true', 'b leads with fence 2', 'b stops: shut-down true', 'terms 1 1', 'leader null', ''].join('\n'),
  );
});

it('type-checks an example against the installed declarations', () => {
  copyFileSync(join(root, 'tests/js/types/example.ts'), join(project, 'example.ts'));
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const args = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--lib', 'es2022,esnext.disposable,dom', 'example.ts'];
  execFileSync('node', [tsc, ...args], { cwd: project, encoding: 'utf8' });
  // and a misuse is caught, so the check is not vacuous
  writeFileSync(join(project, 'bad.ts'), "import { LockTable } from 'expiring-lock';\nnew LockTable().tryAcquire('k', 'a', 10n, 0);\n");
  assert.throws(() => execFileSync('node', [tsc, ...args.slice(0, -1), 'bad.ts'], { cwd: project, encoding: 'utf8', stdio: 'pipe' }));
  assert.ok(readdirSync(project).includes('node_modules'));
});
