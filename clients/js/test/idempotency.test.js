// Idempotent publishing: every publish carries a key made by the client, the same on each
// retry, so a publish cut after it was sent, retried, is delivered once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { OutcomeUnknownError, publish, publishBatch } from '../dist/pushclient.js';
import {
  cursorNow,
  freshChannel,
  record,
  startPushserver,
  startTcpProxy,
  waitFor,
} from './helpers.js';

const KEY = 'sesame';
const FAST = { key: KEY, minDelay: 10, maxDelay: 50 };
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Cuts the first `count` connections after `bytes` bytes of the server's answer (so after
 * the request reached it), and lets the others through. */
function cutFirst(count, bytes = 1) {
  let left = count;
  return () => (left-- > 0 ? bytes : Infinity);
}

/** The requests a recording proxy saw, as [{head, body}], split by their Content-Length. */
function requests(proxy) {
  const text = proxy.sent();
  const found = [];
  for (let at = 0; at < text.length;) {
    const end = text.indexOf('\r\n\r\n', at);
    const head = text.slice(at, end);
    const length = Number(headerOf({ head }, 'Content-Length') || 0);
    found.push({ head, body: text.slice(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  return found;
}

function headerOf(request, name) {
  const match = new RegExp(`^${name}: *(.*?)\\r?$`, 'im').exec(request.head);
  return match && match[1];
}

async function postRaw(url, body, headers = {}) {
  const res = await fetch(url, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY}`, ...headers },
  });
  return { status: res.status, body: await res.json() };
}

/** A subscriber from "now" on `channel`, directly on the server. */
async function follow(server, channel) {
  const cursor = await cursorNow(server.url, channel);
  return record(server.url, channel, { transport: 'stream', cursor });
}

describe('idempotent publishing', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1', '--publish-key', KEY]);
  });
  after(() => server.stop());

  /* cut at the answer's first byte, and inside its status line ("HTTP/1.1 20") */
  for (const bytes of [1, 11]) {
    test(`a publish cut after it was sent (${bytes} B answered) is retried with its key`, async () => {
      const channel = freshChannel('cut-once');
      const { sub, log } = await follow(server, channel);
      const proxy = await startTcpProxy(server.port, { cutAfter: cutFirst(1, bytes) });
      try {
        const receipt = await publish(proxy.url, channel, { n: 1 }, FAST);
        const next = await publish(server.url, channel, { n: 2 }, FAST);
        await waitFor(() => log.length >= 2, 'two messages');
        assert.equal(proxy.stats.cuts, 1, 'the first attempt was cut');
        const tries = requests(proxy);
        assert.equal(tries.length, 2);
        const key = headerOf(tries[0], 'Idempotency-Key');
        assert.match(key, UUID_V4);
        assert.equal(headerOf(tries[1], 'Idempotency-Key'), key);
        assert.equal(receipt.id, 1);
        assert.equal(next.id, 2);
        assert.deepEqual(log.map((m) => [m.id, m.data.n]), [[1, 1], [2, 2]]);
      } finally {
        sub.close();
        await proxy.close();
      }
    });
  }

  test('a batch repeating its items\' keys answers the original ids', async () => {
    const channel = freshChannel('batch');
    const { sub, log } = await follow(server, channel);
    try {
      const first = await publishBatch(server.url, [
        { channel, data: 'a', idempotency_key: 'k-a' },
        { channel, data: 'b', idempotency_key: 'k-b' },
      ], FAST);
      const again = await publishBatch(server.url, [
        { channel, data: 'b, again', idempotency_key: 'k-b' },
        { channel, data: 'c' },
        { channel, data: 'a, again', idempotency_key: 'k-a' },
      ], FAST);
      assert.deepEqual(first.map((r) => r.id), [1, 2]);
      assert.deepEqual(again.map((r) => r.id), [2, 3, 1]);
      const last = await publish(server.url, channel, 'd', FAST);
      await waitFor(() => log.length >= 4, 'four messages');
      assert.equal(last.id, 4);
      assert.deepEqual(log.map((m) => m.data), ['a', 'b', 'c', 'd']);
    } finally {
      sub.close();
    }
  });

  test('every publish and batch item carries a new key the server remembers', async () => {
    const channel = freshChannel('keys');
    const proxy = await startTcpProxy(server.port);
    /* crypto.getRandomValues alone, as in runtimes older than crypto.randomUUID */
    const oldRuntime = { getRandomValues: (bytes) => globalThis.crypto.getRandomValues(bytes) };
    try {
      await publish(proxy.url, channel, 1, FAST);
      await publish(proxy.url, channel, 2, { ...FAST, crypto: oldRuntime });
      await publishBatch(proxy.url, [{ channel, data: 3 }, { channel, data: 4 }], FAST);
      const [one, two, batch] = requests(proxy);
      const keys = [
        headerOf(one, 'Idempotency-Key'),
        headerOf(two, 'Idempotency-Key'),
        ...JSON.parse(batch.body).map((item) => item.idempotency_key),
      ];
      assert.equal(headerOf(batch, 'Idempotency-Key'), null);
      for (const key of keys) assert.match(key, UUID_V4);
      assert.equal(new Set(keys).size, 4);
      const url = `${server.url}/pub/${channel}`;
      for (const [i, key] of keys.entries()) {
        const repeat = await postRaw(url, 'republished', { 'Idempotency-Key': key });
        assert.deepEqual([repeat.status, repeat.body.id], [201, i + 1]);
      }
      assert.equal((await postRaw(url, 5)).body.id, 5);
    } finally {
      await proxy.close();
    }
  });

  test('a runtime without a random source must give its own keys', async () => {
    const channel = freshChannel('no-crypto');
    assert.throws(() => publish(server.url, channel, 1, { ...FAST, crypto: null }), {
      message: /no crypto.getRandomValues/,
    });
    const receipt = await publish(server.url, channel, 1,
      { ...FAST, crypto: null, idempotencyKey: 'mine' });
    const repeat = await postRaw(`${server.url}/pub/${channel}`, 2, { 'Idempotency-Key': 'mine' });
    assert.deepEqual([receipt.id, repeat.body.id], [1, 1]);
  });

  test('a publish whose every attempt is cut fails as OutcomeUnknownError with its key',
    async () => {
      const channel = freshChannel('unknown');
      const { sub, log } = await follow(server, channel);
      const proxy = await startTcpProxy(server.port, { cutAfter: cutFirst(3) });
      try {
        const err = await publish(proxy.url, channel, 'maybe', { ...FAST, retries: 2 })
          .then(() => assert.fail('resolved'), (e) => e);
        assert.ok(err instanceof OutcomeUnknownError);
        assert.ok(err instanceof Error);
        assert.equal(err.code, 'outcome_unknown');
        assert.equal(requests(proxy).length, 3);
        const [key] = err.idempotencyKeys;
        assert.match(key, UUID_V4);
        const receipt = await publish(server.url, channel, 'maybe', { ...FAST, idempotencyKey: key });
        await publish(server.url, channel, 'after', FAST);
        await waitFor(() => log.length >= 2, 'two messages');
        assert.equal(receipt.id, 1);
        assert.deepEqual(log.map((m) => m.data), ['maybe', 'after']);
      } finally {
        sub.close();
        await proxy.close();
      }
    });

  test('a 4xx other than 429 is final: one attempt, a plain Error', async () => {
    const proxy = await startTcpProxy(server.port);
    try {
      const err = await publish(proxy.url, freshChannel('final'), 1, { ...FAST, key: 'wrong' })
        .then(() => assert.fail('resolved'), (e) => e);
      assert.equal(err.status, 401);
      assert.equal(err.code, 'unauthorized');
      assert.ok(!(err instanceof OutcomeUnknownError));
      assert.equal(requests(proxy).length, 1);
    } finally {
      await proxy.close();
    }
  });
});

describe('a rate-limited publisher', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--max-publish-rate', '1']);
  });
  after(() => server.stop());

  test('a 429 is retried after its Retry-After with the same key', async () => {
    const channel = freshChannel('rate');
    const proxy = await startTcpProxy(server.port);
    try {
      const receipts = [];
      for (const n of [1, 2]) {
        receipts.push(await publish(proxy.url, channel, n, { minDelay: 10, maxDelay: 50 }));
      }
      assert.deepEqual(receipts.map((r) => r.id), [1, 2]);
      const tries = requests(proxy);
      assert.ok(tries.length >= 3, 'the second publish was refused at least once');
      const keys = tries.slice(1).map((request) => headerOf(request, 'Idempotency-Key'));
      assert.equal(new Set(keys).size, 1);
      assert.notEqual(keys[0], headerOf(tries[0], 'Idempotency-Key'));
    } finally {
      await proxy.close();
    }
  });
});
