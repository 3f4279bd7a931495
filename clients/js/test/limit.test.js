// The long-poll `limit` and the backoff after cut answers, against a scripted fetch: each poll's
// outcome is chosen by the test, and what the client asks for next is read off its URLs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PushSubscription } from '../dist/pushclient.js';
import { waitFor } from './helpers.js';

const ANSWER = JSON.stringify({ messages: [], cursor: 'c1' });

/** One poll's outcome: refused before any head, a 200 head whose body breaks off, or whole. */
const OUTCOMES = {
  refused: () => Promise.reject(new TypeError('connection refused')),
  cut: () => Promise.resolve({
    status: 200,
    headers: { get: () => null },
    text: () => Promise.reject(new TypeError('terminated')),
  }),
  whole: () => Promise.resolve({
    status: 200,
    headers: { get: () => null },
    text: () => Promise.resolve(ANSWER),
  }),
};

/**
 * Polls through a fetch that plays `script` (then never answers); resolves with the `limit` of
 * every poll sent and the delay before each reconnect.
 */
async function play(script, options = {}) {
  const limits = [];
  const delays = [];
  const fetch = (url) => {
    limits.push(Number(new URL(url).searchParams.get('limit')));
    const outcome = script[limits.length - 1];
    return outcome ? OUTCOMES[outcome]() : new Promise(() => {});
  };
  const sub = new PushSubscription('http://127.0.0.1:1', ['a'], {
    transport: 'longpoll',
    cursor: 'c0',
    fetch,
    minDelay: 20,
    onStatus: (status, info) => status === 'reconnecting' && delays.push(info.delay),
    ...options,
  });
  try {
    await waitFor(() => limits.length > script.length, `${script.length + 1} polls`);
  } finally {
    sub.close();
  }
  return { limits, delays };
}

test('limit halves after each cut answer, down to 1, and doubles back to the cap', async () => {
  const cuts = Array(8).fill('cut');
  const wholes = Array(8).fill('whole');
  const { limits } = await play([...cuts, ...wholes]);
  assert.deepEqual(limits, [100, 50, 25, 12, 6, 3, 1, 1, 1, 2, 4, 8, 16, 32, 64, 100, 100]);
});

test('a poll refused before its head leaves the limit as it is', async () => {
  const { limits } = await play(['cut', 'refused', 'refused', 'whole', 'cut']);
  assert.deepEqual(limits, [100, 50, 50, 50, 100, 50]);
});

test('the cap is the pollLimit option', async () => {
  const { limits } = await play(['whole', 'cut', 'cut', 'whole'], { pollLimit: 10 });
  assert.deepEqual(limits, [10, 10, 5, 2, 4]);
});

test('JSONP cannot see a cut body: every failed poll halves the limit', async () => {
  const limits = [];
  // "ran": the script loaded and ran without calling back (what a browser makes of some cuts)
  const script = ['failed', 'ran', 'whole', 'failed'];
  const head = {
    appendChild(element) {
      const url = new URL(element.src);
      limits.push(Number(url.searchParams.get('limit')));
      const outcome = script[limits.length - 1];
      const callback = url.searchParams.get('callback').split('.')[1];
      if (outcome === 'failed') setTimeout(() => element.onerror && element.onerror(), 0);
      if (outcome === 'ran') setTimeout(() => element.onload && element.onload(), 0);
      const answer = () => globalThis.__pushclient[callback](JSON.parse(ANSWER));
      if (outcome === 'whole') setTimeout(answer, 0);
    },
    removeChild() {},
  };
  const document = {
    documentElement: head,
    createElement: () => ({}),
    getElementsByTagName: () => [head],
  };
  const sub = new PushSubscription('http://127.0.0.1:1', ['a'], {
    transport: 'jsonp',
    cursor: 'c0',
    document,
    minDelay: 20,
  });
  try {
    await waitFor(() => limits.length > script.length, `${script.length + 1} polls`);
  } finally {
    sub.close();
  }
  assert.deepEqual(limits, [100, 50, 25, 50, 25]);
});

test('a cut answer counts as progress: the retry after it is a first retry again', async () => {
  const { delays } = await play(['refused', 'refused', 'refused', 'cut', 'refused']);
  // retry n waits between half and all of 20 ms * 2^(n-1)
  assert.ok(delays[2] >= 40, `third refusal in a row waits longer: ${delays}`);
  assert.ok(delays[3] <= 20, `the retry after the cut answer is retry 1: ${delays}`);
  assert.ok(delays[4] <= 40, `the refusal after it is retry 2: ${delays}`);
});
