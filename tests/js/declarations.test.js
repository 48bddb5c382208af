// The hand-written TypeScript declarations (lock-wasm/js/index.d.ts) cannot drift from the code:
// every value the package exports is declared and every declared value exists; every public
// class declares exactly its runtime members (methods, getters, statics, instance fields and
// the disposal symbols), and no internal is a name on a public class. Parsed with the TypeScript
// compiler API, compared with the loaded package.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import * as pkg from '../../lock-wasm/js/src/node.js';

const dts = readFileSync(new URL('../../lock-wasm/js/index.d.ts', import.meta.url), 'utf8');
const source = ts.createSourceFile('index.d.ts', dts, ts.ScriptTarget.Latest, true);

const isExported = (node) => node.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
const isStatic = (node) => node.modifiers?.some((m) => m.kind === ts.SyntaxKind.StaticKeyword);
const isPrivate = (node) => node.modifiers?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword);

function memberName(member) {
  const name = member.name;
  if (ts.isComputedPropertyName(name)) return name.expression.getText(source); // Symbol.dispose
  return name.getText(source);
}

/** Declared values (classes, consts) and each class's members. */
function declared() {
  const values = new Set();
  const classes = new Map();
  for (const statement of source.statements) {
    if (!isExported(statement)) continue;
    if (ts.isClassDeclaration(statement)) {
      const name = statement.name.text;
      values.add(name);
      const members = { instance: new Set(), statics: new Set() };
      for (const member of statement.members) {
        // Optional members (`result?`) exist only on some instances: not compared.
        if (ts.isConstructorDeclaration(member) || isPrivate(member) || member.questionToken) continue;
        (isStatic(member) ? members.statics : members.instance).add(memberName(member));
      }
      classes.set(name, members);
    } else if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations) values.add(d.name.text);
    } else if (ts.isFunctionDeclaration(statement)) {
      values.add(statement.name.text);
    }
  }
  return { values, classes };
}

/** A class's runtime members: prototype chain up to the base (Error for LockError), statics. */
function runtime(Class, instance) {
  const instanceNames = new Set();
  for (let proto = Class.prototype; proto && proto !== Object.prototype && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) if (name !== 'constructor') instanceNames.add(name);
    for (const sym of Object.getOwnPropertySymbols(proto)) {
      if (sym === Symbol.dispose) instanceNames.add('Symbol.dispose');
      else if (sym === Symbol.asyncDispose) instanceNames.add('Symbol.asyncDispose');
      else instanceNames.add(`internal ${String(sym)}`);
    }
  }
  for (const name of Object.keys(instance)) instanceNames.add(name);
  const statics = new Set(Object.getOwnPropertyNames(Class).filter((n) => !['length', 'name', 'prototype'].includes(n)));
  return { instanceNames, statics };
}

function instances() {
  const locks = new pkg.Locks();
  const lease = locks.tryAcquire('k', { ttl: 10 });
  const table = new pkg.LockTable();
  const error = new pkg.LockError('held', 'message', {});
  const record = new pkg.KeyRecord();
  const storeError = new pkg.StoreError('lost', 'message');
  const manager = new pkg.LockManager();
  const election = locks.election('e', { ttl: 10 });
  const stopped = new pkg.TermStopped('resigned', 1);
  const result = { Locks: locks, Lease: lease, LockTable: table, LockError: error, KeyRecord: record, StoreError: storeError, LockManager: manager, Election: election, TermStopped: stopped };
  return [result, () => (lease.release(), locks.close(), table.free(), record.free(), manager.locks.close())];
}

it('every exported value is declared, and every declared value is exported', () => {
  const { values } = declared();
  assert.deepEqual([...values].sort(), Object.keys(pkg).sort());
});

it('every public class declares exactly its runtime members, and no internal has a name', () => {
  const { classes } = declared();
  const [objects, done] = instances();
  try {
    for (const [name, members] of classes) {
      const { instanceNames, statics } = runtime(pkg[name], objects[name]);
      const publicNames = [...instanceNames].filter((n) => !n.startsWith('internal '));
      if (name === 'LockError') publicNames.push('name', 'code', 'details'); // own fields, also declared
      if (name === 'StoreError') publicNames.push('name', 'code');
      if (name === 'TermStopped') publicNames.push('name', 'code', 'fence');
      assert.deepEqual([...new Set(publicNames)].sort(), [...members.instance].sort(), `${name} members`);
      assert.deepEqual([...statics].sort(), [...members.statics].sort(), `${name} statics`);
      assert.deepEqual(publicNames.filter((n) => n.startsWith('_')), [], `${name} exposes internals by name`);
    }
  } finally {
    done();
  }
});

/** The member names of a declared interface, in order. */
function interfaceMembers(name) {
  const node = source.statements.find((st) => ts.isInterfaceDeclaration(st) && st.name.text === name);
  assert.ok(node, `interface ${name} is declared`);
  return node.members.map((m) => m.name.getText(source));
}

it('the record types list exactly the fields the engine reports', () => {
  const table = new pkg.LockTable({}, {});
  try {
    assert.deepEqual(interfaceMembers('Limits'), Object.keys(pkg.LockTable.defaultLimits()));
    assert.deepEqual(interfaceMembers('Stats'), Object.keys(table.stats(0)));
    table.tryAcquire('k', 'a', 100, 0);
    table.acquire('k', 'w', 50, 1_000, 0);
    const info = table.inspect('k', 0);
    assert.deepEqual(interfaceMembers('KeyInfo').sort(), Object.keys(info).sort());
    assert.deepEqual(interfaceMembers('WaiterInfo').sort(), Object.keys(info.waiters[0]).sort());
    const record = new pkg.KeyRecord();
    assert.deepEqual(interfaceMembers('RecordStep'), Object.keys(record.tryAcquire('k', 'a', 100, 0)));
    record.free();
  } finally {
    table.free();
  }
});

it('the error code and outcome unions list exactly the core codes and outcome types', () => {
  const union = (name) => {
    const node = source.statements.find((st) => ts.isTypeAliasDeclaration(st) && st.name.text === name);
    assert.ok(node, `type ${name} is declared`);
    return node.type.types.map((t) => t.literal.text);
  };
  assert.deepEqual(union('LockErrorCode'), pkg.LockTable.errorCodes());
  const outcomeTypes = ['Granted', 'Queued'].flatMap((name) => {
    const node = source.statements.find((st) => ts.isInterfaceDeclaration(st) && st.name.text === name);
    const type = node.members.find((m) => m.name.getText(source) === 'type').type;
    return ts.isUnionTypeNode(type) ? type.types.map((t) => t.literal.text) : [type.literal.text];
  });
  assert.deepEqual(outcomeTypes.sort(), pkg.LockTable.outcomeTypes().sort());
});

it('the implementation type-checks against the declarations (its JSDoc refers to them)', () => {
  // tests/js/types/impl-check.ts requires each implementation class to be assignable to its
  // declaration; --checkJs checks the JS bodies against their JSDoc, which names the declared
  // types (LocksOptions, AcquireOutcome, LostInfo, ...). A return shape, a member or an option
  // that drifts fails to compile.
  const root = new URL('../../', import.meta.url);
  const tsc = fileURLToPath(new URL('node_modules/typescript/bin/tsc', root));
  const args = ['--noEmit', '--allowJs', '--checkJs', '--strict', '--noImplicitAny', 'false', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--target', 'es2022', '--lib', 'es2024,esnext.disposable,dom', 'tests/js/types/impl-check.ts'];
  try {
    execFileSync('node', [tsc, ...args], { cwd: fileURLToPath(root), encoding: 'utf8', stdio: 'pipe' });
  } catch (error) {
    assert.fail(`the implementation does not match index.d.ts:\n${error.stdout}${error.stderr}`);
  }
});
