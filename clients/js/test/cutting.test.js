// Every transport through a link that drops each connection after a few hundred to a few
// thousand bytes: 300 messages published at about 100/s must all arrive, once and in order.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { publish } from '../dist/pushclient.js';
import {
  cursorNow,
  freshChannel,
  record,
  scriptDocument,
  startPushserver,
  startTcpProxy,
  waitFor,
} from './helpers.js';

const COUNT = 300;
const PUBLISH_INTERVAL_MS = 10;
const DEADLINE_MS = 60000;
const TRANSPORTS = {
  stream: {},
  longpoll: {},
  sse: {},
  ws: {},
  jsonp: { document: scriptDocument() },
};

/** Between 300 and 3,000 bytes, drawn anew for each connection. */
function cutAfter() {
  return 300 + Math.floor(Math.random() * 2701);
}

/** Publishes 1..COUNT on a fixed schedule of one per PUBLISH_INTERVAL_MS. */
async function publishPaced(baseUrl, channel) {
  const start = Date.now();
  for (let n = 1; n <= COUNT; n++) {
    await publish(baseUrl, channel, { n });
    const due = start + n * PUBLISH_INTERVAL_MS - Date.now();
    if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
  }
}

describe('through a link that cuts every connection after 300-3,000 bytes', () => {
  let server;
  before(async () => {
    server = await startPushserver(['--heartbeat', '1', '--history-size', '1000']);
  });
  after(() => server.stop());

  for (const [transport, options] of Object.entries(TRANSPORTS)) {
    test(`${transport}: ${COUNT} messages at 100/s arrive once and in order`, async (t) => {
      const proxy = await startTcpProxy(server.port, { cutAfter });
      const channel = freshChannel(`cut-${transport}`);
      const cursor = await cursorNow(server.url, channel);
      const { sub, log, messages } = record(proxy.url, channel, { transport, cursor, ...options });
      try {
        const started = Date.now();
        const publishing = publishPaced(server.url, channel);
        await waitFor(() => messages().length >= COUNT, `${COUNT} messages`, DEADLINE_MS);
        const elapsed = Date.now() - started;
        await publishing;
        const expected = Array.from({ length: COUNT }, (_, i) => i + 1);
        assert.deepEqual(log.map((event) => event.id), expected);
        assert.deepEqual(log.map((event) => event.data.n), expected);
        assert.ok(proxy.stats.cuts > 0, 'the proxy cut connections');
        assert.equal(sub.transport, transport);
        t.diagnostic(`${transport}: ${COUNT} messages in ${elapsed} ms, ${proxy.stats.cuts} cuts`);
      } finally {
        sub.close();
        await proxy.close();
      }
    });
  }
});
