// transport "auto": the choice, the fall-back behind a buffering proxy, final errors.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { startDevServer } from '../demo/server.mjs';
import { PushSubscription, publish } from '../dist/pushclient.js';
import { cursorNow, freshChannel, startPushserver, waitFor } from './helpers.js';

function subscribe(baseUrl, channel, options) {
  const got = [];
  const statuses = [];
  const sub = new PushSubscription(baseUrl, channel, {
    heartbeat: 1,
    minDelay: 50,
    pollTimeout: 5,
    onMessage: (message) => got.push(message.data),
    onStatus: (status, info) => statuses.push({ status, info }),
    ...options,
  });
  return { sub, got, statuses };
}

describe('auto', () => {
  let server;
  let devServer;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1']);
    devServer = await startDevServer({ upstream: server.url });
  });
  after(async () => {
    await devServer.close();
    await server.stop();
  });

  test('picks WebSocket when given a constructor, else fetch streaming', async () => {
    const channel = freshChannel('auto');
    const cursor = await cursorNow(server.url, channel);
    const withWs = subscribe(server.url, channel, { cursor, WebSocket });
    const withoutWs = subscribe(server.url, channel, { cursor });
    try {
      await publish(server.url, channel, 'hello');
      await waitFor(() => withWs.got.length && withoutWs.got.length, 'both subscribers');
      assert.equal(withWs.sub.transport, 'ws');
      assert.equal(withoutWs.sub.transport, 'stream');
      assert.deepEqual(withWs.got, ['hello']);
      assert.deepEqual(withoutWs.got, ['hello']);
    } finally {
      withWs.sub.close();
      withoutWs.sub.close();
    }
  });

  test('behind a buffering proxy, falls back to long-poll and delivers', async () => {
    const channel = freshChannel('buffered');
    const cursor = await cursorNow(server.url, channel);
    const { sub, got, statuses } = subscribe(`${devServer.url}/buffered`, channel, {
      cursor,
      WebSocket,
    });
    try {
      await waitFor(() => sub.transport === 'longpoll', 'the fall-back to long-poll');
      for (const n of [1, 2, 3]) await publish(server.url, channel, { n });
      await waitFor(() => got.length >= 3, 'three messages over long-poll');
      assert.deepEqual(got, [{ n: 1 }, { n: 2 }, { n: 3 }]);
      const fallbacks = statuses.filter((s) => s.status === 'fallback').map((s) => s.info.to);
      assert.deepEqual(fallbacks, ['stream', 'longpoll'], 'ws refused, stream silent');
    } finally {
      sub.close();
    }
  });

  test('a stream whose heartbeats stop twice falls back to long-poll', async () => {
    const channel = freshChannel('late-buffered');
    const cursor = await cursorNow(server.url, channel);
    const { sub, got, statuses } = subscribe(`${devServer.url}/late-buffered`, channel, { cursor });
    try {
      await waitFor(() => sub.transport === 'longpoll', 'the fall-back to long-poll');
      await publish(server.url, channel, 'late');
      await waitFor(() => got.length === 1, 'a message over long-poll');
      assert.deepEqual(got, ['late']);
      const stalls = statuses.filter((s) => s.status === 'reconnecting').map((s) => s.info.reason);
      assert.deepEqual(stalls.map((reason) => [reason.error, reason.silent]), [
        ['heartbeat', false],
        ['heartbeat', false],
      ]);
    } finally {
      sub.close();
    }
  });

  test('after a fall-back, tries the better transport again later and keeps it', async () => {
    let blocked = true;
    // Refused while blocked, as behind a proxy that drops upgrades, then a plain WebSocket.
    class BlockableWebSocket extends WebSocket {
      constructor(url) {
        super(blocked ? 'ws://127.0.0.1:1/' : url);
      }
    }
    const channel = freshChannel('better');
    const cursor = await cursorNow(server.url, channel);
    const { sub, got, statuses } = subscribe(server.url, channel, {
      cursor,
      WebSocket: BlockableWebSocket,
      betterAfter: 300,
    });
    try {
      await waitFor(() => sub.transport === 'stream', 'the fall-back to streaming');
      await publish(server.url, channel, 1);
      await waitFor(() => got.length === 1, 'a message over the stream');
      blocked = false;
      await waitFor(() => statuses.some((s) => s.status === 'upgrade'), 'a try of WebSocket');
      await waitFor(() => sub.transport === 'ws' && statuses.at(-1).status === 'open', 'ws open');
      await publish(server.url, channel, 2);
      await waitFor(() => got.length === 2, 'a message over WebSocket');
      assert.deepEqual(got, [1, 2]);
      const moves = statuses.filter((s) => s.status === 'fallback' || s.status === 'upgrade');
      assert.deepEqual(moves[0].info, { from: 'ws', to: 'stream', reason: moves[0].info.reason });
      assert.deepEqual(moves.at(-1), { status: 'upgrade', info: { from: 'stream', to: 'ws' } });
      assert.equal(sub.transport, 'ws');
    } finally {
      sub.close();
    }
  });

  test('close() stops delivery and reports the cursor', async () => {
    const channel = freshChannel('close');
    const cursor = await cursorNow(server.url, channel);
    const { sub, got, statuses } = subscribe(server.url, channel, { cursor, transport: 'stream' });
    await publish(server.url, channel, 1);
    await waitFor(() => got.length === 1, 'the first message');
    sub.close();
    assert.equal(sub.closed, true);
    assert.equal(statuses.at(-1).status, 'closed');
    assert.equal(statuses.at(-1).info.cursor, sub.cursor);
    const subscribers = async () => {
      const res = await fetch(`${server.url}/channels/${channel}`);
      return (await res.json()).subscribers;
    };
    await waitFor(async () => (await subscribers()) === 0, 'the server to see the client leave');
    const receipt = await publish(server.url, channel, 2);
    assert.equal(receipt.subscribers, 0);
    assert.deepEqual(got, [1]);
  });
});

describe('final errors', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--subscribe-secret', 'not-for-this-client']);
  });
  after(() => server.stop());

  for (const transport of ['stream', 'longpoll', 'sse']) {
    test(`${transport}: a 401 closes the subscription instead of retrying`, async () => {
      const { sub, statuses } = subscribe(server.url, freshChannel('denied'), { transport });
      await waitFor(() => sub.closed, 'the subscription to close');
      const error = statuses.find((s) => s.status === 'error');
      assert.equal(error.info.status, 401);
      assert.equal(error.info.error, 'unauthorized');
      assert.equal(statuses.filter((s) => s.status === 'connecting').length, 1);
    });
  }
});

describe('Retry-After', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1', '--max-connections', '1']);
  });
  after(() => server.stop());

  for (const transport of ['stream', 'longpoll', 'sse']) {
    test(`${transport}: a 503 is retried after Retry-After, then delivers`, async () => {
      const channel = freshChannel(`busy-${transport}`);
      // The server holds one connection at most: wait until the previous case's are gone.
      await waitFor(async () => {
        const stats = await (await fetch(`${server.url}/stats`)).json();
        return stats.connections.total === 0;
      }, 'an idle server');
      const cursor = await cursorNow(server.url, channel);
      const holder = subscribe(server.url, channel, { transport: 'stream' });
      await waitFor(() => holder.statuses.some((s) => s.status === 'open'), 'the first stream');
      const { sub, got, statuses } = subscribe(server.url, channel, { transport, cursor });
      try {
        await waitFor(() => statuses.some((s) => s.status === 'reconnecting'), 'a refusal');
        const retry = statuses.find((s) => s.status === 'reconnecting').info;
        assert.equal(retry.reason.status, 503);
        assert.equal(retry.reason.error, 'over_capacity');
        assert.ok(retry.delay >= retry.reason.retryAfter * 1000 && retry.reason.retryAfter > 0);
        holder.sub.close();
        await publish(server.url, channel, 'through');
        await waitFor(() => got.length === 1, 'the message');
        assert.deepEqual(got, ['through']);
        assert.equal(sub.closed, false);
      } finally {
        holder.sub.close();
        sub.close();
      }
    });
  }
});
