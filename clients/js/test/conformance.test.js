// Replays the shared wire transcripts (../../tests/conformance/, see its README) through this
// client's own units (PushClient.wire): the NDJSON and SSE parsers (the compact framing too) fed
// the body in the transcript's reads, long-polls and error answers through requestJson with a
// stand-in fetch, JSONP through jsonpRequest with a stand-in document, backoff and poll sizing.
// No server runs. Compressed cases are the HTTP stack's to decode (fetch, the ws package), so a
// subscription reads them from a loopback server, one read at a time: each read is sent once the
// subscription has delivered every event the reads before it completed.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { describe, test } from 'node:test';
import vm from 'node:vm';
import WebSocket from 'ws';
import PushClient from '../dist/pushclient.js';
import { waitFor } from './helpers.js';

const { wire } = PushClient;
const DIR = new URL('../../../tests/conformance/', import.meta.url);
const CASES = readdirSync(DIR)
  .filter((name) => name.endsWith('.json'))
  .sort()
  .map((name) => JSON.parse(readFileSync(new URL(name, DIR), 'utf8')));
const compressed = (c) => c.content_encoding !== undefined || c.extensions !== undefined;
const ofKind = (...kinds) => CASES.filter((c) => kinds.includes(c.kind) && !compressed(c));

/* The events a parser hands to its link, in the transcripts' notation; `error` when the body
 * held something that is not JSON (the real link ends the connection: a retried failure). */
function collector() {
  const seen = { events: [], error: null };
  const link = {
    json(text) {
      let obj;
      try {
        obj = JSON.parse(text);
      } catch (e) {
        seen.error = 'malformed';
        return;
      }
      link.event(obj);
    },
    compact(channel, data, cursor) {
      let obj;
      try {
        obj = wire.compactMessage(channel, data, cursor);
      } catch (e) {
        seen.error = 'malformed';
        return;
      }
      link.event(obj);
    },
    event(obj) {
      const kind = wire.eventKind(obj);
      if (kind === 'message') {
        const { channel, id, ts, data, cursor } = obj;
        seen.events.push({ message: { channel, id, ts, data, cursor } });
      } else if (kind === 'gap') {
        const { channel, from, to, reason, cursor } = obj;
        seen.events.push({ gap: { channel, from, to, reason, cursor } });
      } else if (kind === 'reconnect') {
        seen.events.push({ reconnect: { cursor: obj.cursor ?? null } });
      } else if (kind === 'expired') {
        seen.events.push({ expired: {} });
      }
    },
    cursor(cursor) {
      seen.events.push({ checkpoint: cursor });
    },
  };
  return { link, seen };
}

/* The body's bytes in the transcript's reads, decoded as the fetch stream reader does. */
function reads(c) {
  const bytes = Buffer.from(c.body, 'utf8');
  const edges = [0, ...c.splits, bytes.length];
  const decoder = new TextDecoder();
  return edges.slice(1).map((end, i) => decoder.decode(bytes.subarray(edges[i], end), { stream: true }));
}

/* One request answered with the transcript's status, headers and body: done(err, body). */
function answer(status, headers, body) {
  const fetch = () => Promise.resolve(new Response(body, { status, headers }));
  return new Promise((resolve) => {
    wire.requestJson({ fetch }, 'GET', 'http://127.0.0.1/lp/news', {}, null, 0, (err, value) => {
      resolve({ err, value });
    });
  });
}

/* A JSONP poll whose script runs the transcript's body, as a browser would, under the name the
 * server was asked to call (the transcript's `callback`). */
function jsonp(c) {
  const head = {
    appendChild(script) {
      const id = /callback=__pushclient\.(\w+)/.exec(script.src)[1];
      const context = { [c.callback]: (body) => globalThis.__pushclient[id](body) };
      try {
        vm.runInNewContext(c.body, context);
      } catch (e) {
        /* a browser reports the script's error, then fires load all the same */
      }
      if (script.onload) { script.onload(); }
    },
  };
  const doc = { createElement: () => ({}), getElementsByTagName: () => [head] };
  return new Promise((resolve) => {
    wire.jsonpRequest(doc, 'http://127.0.0.1/lp/news?limit=100', 5000, (err, value) => {
      resolve({ err, value });
    });
  });
}

function expectOutcome(c, seen) {
  if (c.error) {
    assert.equal(seen.error, c.error);
  } else {
    assert.equal(seen.error, null);
    assert.deepEqual(seen.events, c.expect);
  }
}

async function polled(c, result) {
  const { link, seen } = collector();
  if (result.err) {
    seen.error = 'malformed';
    assert.equal(result.err.final, undefined, 'a failed poll is retried');
  } else {
    wire.deliverAnswer(result.value, link);
  }
  expectOutcome(c, seen);
}

test('every transcript kind is replayed here', () => {
  const kinds = new Set(CASES.map((c) => c.kind));
  const replayed = ['longpoll', 'jsonp', 'ndjson', 'sse', 'sse_compact', 'websocket', 'error',
    'retry_after', 'backoff', 'backoff_sequence', 'poll_limit'];
  assert.deepEqual([...kinds].filter((kind) => !replayed.includes(kind)), []);
  assert.ok(CASES.length >= 20);
});

describe('bodies give the events the transcripts expect', () => {
  for (const c of ofKind('ndjson', 'sse', 'sse_compact')) {
    test(c.case, () => {
      const { link, seen } = collector();
      const parse = c.kind === 'ndjson' ? wire.ndjsonParser(link) : wire.sseParser(link);
      for (const chunk of reads(c)) { parse(chunk); }
      expectOutcome(c, seen);
    });
  }
  for (const c of ofKind('websocket')) {
    test(c.case, () => {
      const { link, seen } = collector();
      for (const frame of c.frames) { link.json(frame); }
      expectOutcome(c, seen);
    });
  }
  for (const c of ofKind('longpoll')) {
    test(c.case, async () => {
      const headers = { 'Content-Type': 'application/json' };
      await polled(c, await answer(200, headers, c.body));
    });
  }
  for (const c of ofKind('jsonp')) {
    test(c.case, async () => {
      await polled(c, await jsonp(c));
    });
  }
});

describe('error answers are classified as the transcripts say', () => {
  for (const c of ofKind('error')) {
    test(c.case, async () => {
      const { err } = await answer(c.status, c.headers, c.body);
      assert.equal(err.status, c.status);
      assert.equal(err.error, c.expect.code);
      if (c.expect.message !== null) { assert.equal(err.message, c.expect.message); }
      assert.equal(err.final ? 'final' : 'retry', c.expect.action);
      assert.equal(err.retryAfter, c.expect.retry_after);
    });
  }
});

test('Retry-After values', () => {
  for (const c of ofKind('retry_after')) {
    for (const vector of c.vectors) {
      assert.equal(wire.parseRetryAfter(vector.header), vector.seconds, vector.header);
    }
  }
});

/* Runs fn with Math.random fixed at `draw`. */
function drawing(draw, fn) {
  const random = Math.random;
  Math.random = () => draw;
  try {
    return fn();
  } finally {
    Math.random = random;
  }
}

test('backoff defaults and bounds', () => {
  const { minDelay, maxDelay } = wire.DEFAULTS;
  for (const c of ofKind('backoff')) {
    assert.equal(minDelay, c.initial * 1000);
    assert.equal(maxDelay, c.maximum * 1000);
    const backoff = new wire.Backoff(minDelay, maxDelay);
    for (const v of c.bounds) {
      assert.deepEqual(backoff.bounds(v.attempt), [v.low * 1000, v.high * 1000], `attempt ${v.attempt}`);
    }
    for (const v of c.with_retry_after) {
      const delays = [0, 1 - Number.EPSILON].map((draw) => drawing(draw, () => {
        const fresh = new wire.Backoff(minDelay, maxDelay);
        for (let n = 1; n < v.attempt; n++) { fresh.failed(null); }
        return fresh.failed(v.retry_after);
      }));
      assert.equal(delays[0], v.low * 1000, JSON.stringify(v));
      assert.ok(Math.abs(delays[1] - v.high * 1000) < 1e-6, JSON.stringify(v));
    }
  }
});

test('progress restarts the retry count', () => {
  for (const c of ofKind('backoff_sequence')) {
    for (const sequence of c.sequences) {
      const backoff = new wire.Backoff(wire.DEFAULTS.minDelay, wire.DEFAULTS.maxDelay);
      const numbers = sequence.attempts.map((attempt) => {
        if (attempt === 'progress') { backoff.progress(); }
        backoff.failed(null);
        return backoff.failures;
      });
      assert.deepEqual(numbers, sequence.retries);
    }
  }
});

test('the poll limit follows cut and whole answers', () => {
  for (const c of ofKind('poll_limit')) {
    assert.equal(wire.DEFAULTS.pollLimit, c.default_cap);
    for (const sequence of c.sequences) {
      const limit = new wire.PollLimit(sequence.cap);
      const seen = sequence.polls.map((poll) => {
        if (poll === 'cut') { limit.cut(); } else if (poll === 'whole') { limit.answered(); }
        return limit.value;
      });
      assert.deepEqual(seen, sequence.limits);
    }
  }
});

/* A loopback server that hands each request (or WebSocket upgrade) to the test. */
function lockstepServer() {
  const waiting = [];
  const arrived = [];
  const upgraded = [];
  function hand(request) {
    if (waiting.length) { waiting.shift()(request); } else { arrived.push(request); }
  }
  const server = http.createServer((req, res) => hand({ req, res }));
  server.on('upgrade', (req, socket) => {
    upgraded.push(socket);
    hand({ req, socket });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({
      url: `http://127.0.0.1:${server.address().port}`,
      next: () => new Promise((take) => {
        if (arrived.length) { take(arrived.shift()); } else { waiting.push(take); }
      }),
      close: () => new Promise((done) => {
        for (const socket of upgraded) { socket.destroy(); }
        server.closeAllConnections();
        server.close(() => done());
      }),
    }));
  });
}

const TRANSPORT = { sse: 'sse', ndjson: 'stream', longpoll: 'longpoll', websocket: 'ws' };
const CONTENT_TYPE = { sse: 'text/event-stream', ndjson: 'application/x-ndjson', longpoll: 'application/json' };

function wsFrame(first, payload) {
  const size = payload.length < 126 ? Buffer.from([payload.length])
    : Buffer.from([126, payload.length >> 8, payload.length & 255]);
  return Buffer.concat([Buffer.from([first]), size, payload]);
}

/* The case's reads (or frames), each once `delivered()` has what the ones before completed. */
async function serve(c, request, delivered) {
  if (c.kind === 'websocket') {
    const { req, socket } = request;
    assert.match(req.headers['sec-websocket-extensions'] ?? '', /permessage-deflate/);
    const key = req.headers['sec-websocket-key'];
    const accept = (await import('node:crypto')).createHash('sha1')
      .update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Extensions: ${c.extensions}\r\n\r\n`);
    for (const [i, frame] of c.frames_base64.entries()) {
      socket.write(wsFrame(0xc1, Buffer.from(frame, 'base64')));
      await waitFor(() => delivered() >= i + 1, `message ${i + 1}`);
    }
    return;
  }
  const { req, res } = request;
  assert.match(req.headers['accept-encoding'] ?? '', /gzip/);
  res.writeHead(200, { 'Content-Type': CONTENT_TYPE[c.kind], 'Content-Encoding': c.content_encoding });
  res.flushHeaders();
  const body = Buffer.from(c.body_base64, 'base64');
  const edges = [0, ...(c.splits ?? []), body.length];
  for (let i = 1; i < edges.length; i++) {
    res.write(body.subarray(edges[i - 1], edges[i]));
    const count = c.delivered ? c.delivered[i - 1] : 0;
    await waitFor(() => delivered() >= count, `${count} events after read ${i}`);
  }
  if (c.end === 'cut') { res.socket.destroy(); } else { res.end(); }
}

describe('compressed answers give each event as its bytes arrive', () => {
  for (const c of CASES.filter(compressed)) {
    test(c.case, async () => {
      const server = await lockstepServer();
      const seen = [];
      const statuses = [];
      const sub = new PushClient.PushSubscription(server.url, ['prices.AAPL'], {
        transport: TRANSPORT[c.kind],
        cursor: 'prices.AAPL:70f05dee1:0',
        WebSocket,
        minDelay: 60000,
        onMessage: ({ channel, id, ts, data, cursor }) => seen.push({ message: { channel, id, ts, data, cursor } }),
        onStatus: (status, info) => statuses.push({ status, info }),
      });
      try {
        await serve(c, await server.next(), () => seen.length);
        const expect = c.expect.filter((e) => e.message);
        await waitFor(() => seen.length >= expect.length, 'every message');
        assert.deepEqual(seen, expect);
        const checkpoint = c.expect.find((e) => e.checkpoint);
        if (checkpoint) { assert.equal(sub.cursor, checkpoint.checkpoint); }
        if (c.end === 'cut') {
          await waitFor(() => statuses.some((s) => s.status === 'reconnecting'), 'the cut noticed');
        }
      } finally {
        sub.close();
        await server.close();
      }
    });
  }
});
