// Shared test fixtures: a real pushserver process, a TCP proxy that can cut connections, and
// polling with a deadline (tests wait on conditions, never on fixed sleeps).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';
import WebSocket from 'ws';
import { PushSubscription } from '../dist/pushclient.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
// The repository's .venv (made by the README's install) has the server's dependencies; a bare
// python3 has not.
const VENV_PYTHON = join(REPO, '.venv', 'bin', 'python');
const PYTHON = process.env.PUSHSERVER_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : 'python3');

/** Starts `python -m pushserver --port 0 ...args`; resolves once it prints its URL. */
export function startPushserver(args = []) {
  const proc = spawn(PYTHON, ['-m', 'pushserver', '--host', '127.0.0.1', '--port', '0', ...args], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error('pushserver did not start in 30 s')), 30000);
    function fail(err) {
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(new Error(`${err.message}\n${stderr}`));
    }
    proc.once('exit', (code) => fail(new Error(`pushserver exited with ${code}`)));
    proc.once('error', fail);
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const match = /pushserver listening on (http:\/\/\S+)/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      const url = match[1];
      resolve({
        url,
        port: Number(new URL(url).port),
        stop: () => new Promise((done) => {
          if (proc.exitCode !== null) return done();
          proc.once('exit', () => done());
          proc.kill('SIGTERM');
        }),
      });
    });
  });
}

/**
 * A TCP relay in front of the server; cut() drops every connection through it. With
 * `cutAfter`, each connection is cut once it has carried cutAfter() bytes from the server, as
 * links that drop every few kilobytes do. sent() is everything clients sent through it.
 */
export function startTcpProxy(targetPort, { cutAfter = null } = {}) {
  const pairs = new Set();
  const stats = { connections: 0, open: 0, maxOpen: 0, cuts: 0 };
  const sent = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair = { client, upstream };
    pairs.add(pair);
    stats.connections += 1;
    stats.open += 1;
    stats.maxOpen = Math.max(stats.maxOpen, stats.open);
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      pairs.delete(pair);
      stats.open -= 1;
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.on('data', (chunk) => sent.push(chunk));
    client.pipe(upstream);
    if (cutAfter) {
      let budget = cutAfter();
      upstream.on('data', (chunk) => {
        if (budget <= 0) return;
        if (chunk.length < budget) {
          budget -= chunk.length;
          client.write(chunk);
          return;
        }
        const last = chunk.subarray(0, budget);
        budget = 0;
        stats.cuts += 1;
        upstream.pause();
        client.end(last, close);
      });
    } else {
      upstream.pipe(client);
    }
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        stats,
        sent: () => Buffer.concat(sent).toString('latin1'),
        cut() {
          for (const pair of [...pairs]) {
            pair.client.destroy();
            pair.upstream.destroy();
          }
        },
        close: () => new Promise((done) => {
          for (const pair of pairs) pair.client.destroy();
          server.close(() => done());
        }),
      });
    });
  });
}

/** Resolves when check() is truthy; rejects after timeoutMs naming what was awaited. */
export async function waitFor(check, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * The cursor for "now" on a channel, from an immediate long-poll. A 503 is asked again after
 * its Retry-After, as any client would: on a server run with `--max-connections 1`, a socket
 * fetch() opened ahead of need counts as an unfinished head until it sends one, and fills it.
 */
export async function cursorNow(baseUrl, channel, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await fetch(`${baseUrl}/lp/${channel}?timeout=0`);
    if (res.status === 200) return (await res.json()).cursor;
    const body = await res.text();
    if (res.status !== 503 || Date.now() > deadline) {
      throw new Error(`cursor request: HTTP ${res.status} ${body}`);
    }
    const seconds = Number(res.headers.get('retry-after')) || 1;
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  }
}

/** Channel names unique per test run, so tests sharing a server never see each other. */
let counter = 0;
export function freshChannel(prefix) {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}

/**
 * A subscription (WebSocket-capable, fast retries) that records messages and gaps in one
 * ordered `log` and status changes in `statuses`; `messages()` is the log without the gaps.
 */
export function record(baseUrl, channels, options) {
  const log = [];
  const statuses = [];
  const sub = new PushSubscription(baseUrl, [].concat(channels), {
    heartbeat: 1,
    minDelay: 50,
    pollTimeout: 5,
    WebSocket,
    onMessage: (message) => log.push(message),
    onGap: (gap) => log.push(gap),
    onStatus: (status, info) => statuses.push({ status, info }),
    ...options,
  });
  return { sub, log, statuses, messages: () => log.filter((event) => event.type === undefined) };
}

/**
 * The part of a browser `document` JSONP uses: an appended <script> is fetched over HTTP and run
 * in this global scope; a failed or truncated load fires its onerror, as a browser's does.
 */
export function scriptDocument() {
  const head = {
    appendChild(script) {
      script.parentNode = head;
      http.get(script.src, (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('close', () => {
          if (script.parentNode !== head) return;
          if (res.statusCode === 200 && res.complete) {
            vm.runInThisContext(Buffer.concat(chunks).toString('utf8'));
            if (script.onload) script.onload();
          } else if (script.onerror) {
            script.onerror();
          }
        });
      }).on('error', () => script.parentNode === head && script.onerror && script.onerror());
    },
    removeChild(script) {
      script.parentNode = null;
    },
  };
  return {
    documentElement: head,
    createElement: () => ({ parentNode: null, onerror: null, onload: null }),
    getElementsByTagName: () => [head],
  };
}
