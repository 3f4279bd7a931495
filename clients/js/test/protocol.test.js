// Protocol behaviours beyond one channel and one server life: multi-channel subscriptions,
// publish keys, and a server restart (reconnect event, then a gap for the new epoch).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { publish, publishBatch } from '../dist/pushclient.js';
import { cursorNow, freshChannel, record, startPushserver, waitFor } from './helpers.js';

describe('multi-channel and publishing', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1', '--publish-key', 'sesame']);
  });
  after(() => server.stop());

  for (const transport of ['stream', 'longpoll', 'ws']) {
    test(`${transport}: two channels interleave in publish order`, async () => {
      const a = freshChannel('multi-a');
      const b = freshChannel('multi-b');
      const { sub, log } = record(server.url, [a, b], { transport, history: 0 });
      try {
        await waitFor(async () => {
          const res = await fetch(`${server.url}/channels/${b}`, {
            headers: { Authorization: 'Bearer sesame' },
          });
          return res.status === 200 && (await res.json()).subscribers === 1;
        }, 'the subscription to reach the server');
        const items = [];
        for (let n = 1; n <= 20; n++) items.push({ channel: n % 3 ? a : b, data: n });
        await publishBatch(server.url, items, { key: 'sesame' });
        await waitFor(() => log.length >= 20, 'twenty messages');
        assert.deepEqual(log.map((m) => m.data), items.map((item) => item.data));
        assert.deepEqual(log.filter((m) => m.channel === b).map((m) => m.id), [1, 2, 3, 4, 5, 6]);
        assert.match(sub.cursor, new RegExp(`${a}:[^,]+:14`));
        assert.match(sub.cursor, new RegExp(`${b}:[^,]+:6`));
      } finally {
        sub.close();
      }
    });
  }

  test('publish needs the key when the server has one', async () => {
    const channel = freshChannel('keyed');
    await assert.rejects(publish(server.url, channel, 'x'), { status: 401, code: 'unauthorized' });
    await assert.rejects(publish(server.url, channel, 'x', { key: 'wrong' }), { status: 401 });
    const receipt = await publish(server.url, channel, { ok: true }, { key: 'sesame' });
    assert.equal(receipt.channel, channel);
    assert.equal(receipt.id, 1);
    assert.equal(typeof receipt.ts, 'number');
  });

  test('publish also takes a Node-style callback', async () => {
    const channel = freshChannel('callback');
    const receipt = await new Promise((resolve, reject) => {
      const returned = publish(server.url, channel, 1, {
        key: 'sesame',
        callback: (err, value) => (err ? reject(err) : resolve(value)),
      });
      assert.equal(returned, undefined);
    });
    assert.equal(receipt.id, 1);
  });
});

describe('server restart', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1']);
  });
  after(() => server.stop());

  test('streams reconnect on the reconnect event and see the new epoch as a gap', async () => {
    const channel = freshChannel('restart');
    const cursor = await cursorNow(server.url, channel);
    const clients = ['stream', 'ws', 'longpoll', 'sse'].map((transport) =>
      record(server.url, [channel], { transport, cursor }),
    );
    try {
      await publish(server.url, channel, 'before');
      await waitFor(() => clients.every((c) => c.log.length === 1), 'the first message');
      await server.stop();
      server = await startPushserver(['--heartbeat', '1', '--port', String(server.port)]);
      await waitFor(() => clients.every((c) => c.log.length === 2), 'the epoch gaps');
      await publish(server.url, channel, 'after');
      await waitFor(() => clients.every((c) => c.log.length === 3), 'the message after');
      for (const { sub, log, statuses } of clients) {
        const [first, gap, last] = log;
        assert.equal(first.data, 'before', sub.transport);
        assert.equal(gap.type, 'gap', sub.transport);
        assert.equal(gap.reason, 'epoch', sub.transport);
        assert.equal(last.data, 'after', sub.transport);
        assert.equal(last.id, 1, sub.transport);
        assert.equal(sub.cursor, last.cursor);
        assert.equal(sub.closed, false);
        if (sub.transport !== 'longpoll') {
          const reasons = statuses.filter((s) => s.status === 'reconnecting');
          assert.equal(reasons[0].info.reason.error, 'reconnect', sub.transport);
        }
      }
    } finally {
      for (const { sub } of clients) sub.close();
    }
  });
});
