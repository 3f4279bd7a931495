// The classic build must stay ES5 for old Android WebViews, and both builds must expose the
// same API generated from the one source.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import vm from 'node:vm';
import { parse } from 'acorn';
import * as esm from '../dist/pushclient.js';

const read = (path) => readFileSync(new URL(path, import.meta.url), 'utf8');
const API = [
  'OutcomeUnknownError',
  'PushSubscription',
  'TRANSPORTS',
  'publish',
  'publishBatch',
  'version',
  'wire',
];

test('the source and the classic build parse as ES5 scripts', () => {
  for (const path of ['../src/pushclient.js', '../dist/pushclient.classic.js']) {
    assert.doesNotThrow(() => parse(read(path), { ecmaVersion: 5, sourceType: 'script' }), path);
  }
});

test('the ES5 check does reject newer syntax', () => {
  assert.throws(() => parse('const f = () => 1;', { ecmaVersion: 5, sourceType: 'script' }));
});

test('the classic build defines the global PushClient in a bare ES5-era global', () => {
  const sandbox = { setTimeout, clearTimeout };
  vm.runInNewContext(read('../dist/pushclient.classic.js'), sandbox);
  assert.deepEqual(Object.keys(sandbox.PushClient).sort(), API);
});

test('the classic build is a CommonJS module too', () => {
  const require = createRequire(import.meta.url);
  const module = { exports: {} };
  const load = new Function('module', 'exports', 'require', read('../dist/pushclient.classic.js'));
  load(module, module.exports, require);
  assert.deepEqual(Object.keys(module.exports).sort(), API);
});

test('the ES module exports the same API', () => {
  assert.deepEqual(Object.keys(esm.default).sort(), API);
  for (const name of API.filter((name) => name !== 'version')) {
    assert.equal(esm[name], esm.default[name]);
  }
});

test('a runtime without any transport is told so', () => {
  const sandbox = { setTimeout, clearTimeout };
  vm.runInNewContext(read('../dist/pushclient.classic.js'), sandbox);
  assert.throws(() => new sandbox.PushClient.PushSubscription('http://127.0.0.1:1', ['a']), {
    message: /no transport available/,
  });
  assert.throws(() => new esm.PushSubscription('http://127.0.0.1:1', ['bad name!']), {
    message: /bad channel name/,
  });
});
