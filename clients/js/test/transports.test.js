// Every transport Node has, against a real pushserver: order, resume after a cut, gaps.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { publish, publishBatch } from '../dist/pushclient.js';
import {
  cursorNow,
  freshChannel,
  record,
  startPushserver,
  startTcpProxy,
  waitFor,
} from './helpers.js';

const TRANSPORTS = ['stream', 'longpoll', 'sse', 'ws'];

function range(first, last) {
  return Array.from({ length: last - first + 1 }, (_, i) => first + i);
}

function publishRange(baseUrl, channel, first, last) {
  return publishBatch(baseUrl, range(first, last).map((n) => ({ channel, data: { n } })));
}

describe('each transport', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1', '--history-size', '2000']);
  });
  after(() => server.stop());

  for (const transport of TRANSPORTS) {
    test(`${transport}: 1000 messages in order, resumed from the cursor after a cut`, async () => {
      const proxy = await startTcpProxy(server.port);
      const channel = freshChannel(transport);
      const cursor = await cursorNow(server.url, channel);
      const { sub, log, messages } = record(proxy.url, channel, { transport, cursor });
      try {
        await publishRange(server.url, channel, 1, 500);
        await waitFor(() => messages().length >= 500, 'the first 500 messages');
        const before = proxy.stats.connections;
        proxy.cut();
        await publishRange(server.url, channel, 501, 1000);
        await waitFor(() => messages().length >= 1000, 'all 1000 messages');
        assert.deepEqual(log.map((event) => event.id), range(1, 1000));
        assert.deepEqual(log.map((event) => event.data.n), range(1, 1000));
        assert.ok(proxy.stats.connections > before, 'the client reconnected after the cut');
        assert.equal(proxy.stats.maxOpen, 1, 'never more than one connection at a time');
        assert.equal(sub.cursor, log.at(-1).cursor);
        assert.equal(sub.transport, transport);
      } finally {
        sub.close();
        await proxy.close();
      }
    });
  }
});

describe('a subscription without a cursor', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1']);
  });
  after(() => server.stop());

  async function held(transport) {
    const stats = await (await fetch(`${server.url}/stats`)).json();
    return stats.connections[transport] === 1;
  }

  for (const transport of TRANSPORTS) {
    test(`${transport}: a drop before the first message loses nothing`, async () => {
      const proxy = await startTcpProxy(server.port);
      const channel = freshChannel(`fresh-${transport}`);
      // Slow retries: the message is published before the client is back.
      const { sub, messages } = record(proxy.url, channel, { transport, minDelay: 400 });
      try {
        await waitFor(() => held(transport), 'the subscription to be held');
        proxy.cut();
        await publish(server.url, channel, 'published while cut off');
        await waitFor(() => messages().length === 1, 'the message published during the cut');
        assert.equal(messages()[0].data, 'published while cut off');
        assert.equal(sub.cursor, messages()[0].cursor);
      } finally {
        sub.close();
        await proxy.close();
      }
    });
  }
});

describe('gaps', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1', '--history-size', '5']);
  });
  after(() => server.stop());

  for (const transport of TRANSPORTS) {
    test(`${transport}: an old cursor gets a gap, then what is still buffered`, async () => {
      const channel = freshChannel(`gap-${transport}`);
      const cursor = await cursorNow(server.url, channel);
      await publishRange(server.url, channel, 1, 20);
      const { sub, log } = record(server.url, channel, { transport, cursor });
      try {
        await waitFor(() => log.length >= 6, 'a gap and 5 messages');
        const [gap, ...rest] = log;
        assert.equal(gap.type, 'gap');
        assert.equal(gap.channel, channel);
        assert.equal(gap.from, 1);
        assert.equal(gap.to, 15);
        assert.equal(gap.reason, 'expired');
        assert.deepEqual(rest.map((event) => event.id), range(16, 20));
      } finally {
        sub.close();
      }
    });
  }
});
