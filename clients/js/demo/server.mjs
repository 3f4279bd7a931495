// Development server for the demo page: serves clients/js/ and reverse-proxies the pushserver
// API on the same origin (so the page needs no CORS), streaming responses and WebSocket
// upgrades through unbuffered. Paths under /buffered/ reach the same API through a proxy that
// buffers whole responses and refuses upgrades, as some corporate and mobile proxies do; under
// /late-buffered/ it passes each response's first chunk, then buffers the rest.
//
//   node demo/server.mjs --upstream http://127.0.0.1:8080 [--port 8000]
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const API = /^\/(lp|stream|sse|ws|pub|channels|stats|metrics|healthz)(\/|$|\?)/;
const BUFFERING = { '/buffered': 'whole', '/late-buffered': 'after-first' };
const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection'];
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
  '.md': 'text/plain; charset=utf-8',
};

function endToEnd(headers) {
  const out = { ...headers };
  for (const name of HOP_BY_HOP) delete out[name];
  return out;
}

function proxy(req, res, upstream, path, buffering) {
  const upReq = http.request({
    host: upstream.hostname,
    port: upstream.port,
    method: req.method,
    path,
    headers: { ...endToEnd(req.headers), host: upstream.host },
  });
  res.on('close', () => upReq.destroy());
  upReq.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.destroy();
  });
  upReq.on('response', (upRes) => {
    if (buffering !== 'whole') {
      res.writeHead(upRes.statusCode, endToEnd(upRes.headers));
      res.flushHeaders();
    }
    if (!buffering) {
      upRes.pipe(res);
      return;
    }
    const chunks = [];
    if (buffering === 'after-first') {
      upRes.once('data', (chunk) => res.write(chunk));
      upRes.on('data', (chunk) => chunks.push(chunk));
      upRes.on('end', () => res.end(Buffer.concat(chunks.slice(1))));
      return;
    }
    upRes.on('data', (chunk) => chunks.push(chunk));
    upRes.on('end', () => {
      const body = Buffer.concat(chunks);
      res.writeHead(upRes.statusCode, { ...endToEnd(upRes.headers), 'content-length': body.length });
      res.end(body);
    });
  });
  req.pipe(upReq);
}

function serveFile(req, res) {
  const urlPath = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  if (urlPath === '/') {
    res.writeHead(302, { location: '/demo/' });
    res.end();
    return;
  }
  let file = normalize(join(ROOT, urlPath));
  if (!file.startsWith(ROOT + sep) || file.includes(`${sep}node_modules${sep}`)) {
    res.writeHead(404).end('not found');
    return;
  }
  try {
    if (statSync(file).isDirectory()) file = join(file, 'index.html');
    statSync(file);
  } catch {
    res.writeHead(404).end('not found');
    return;
  }
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] || 'application/octet-stream',
    'cache-control': 'no-store',
  });
  createReadStream(file).pipe(res);
}

/** The buffering prefix of a request path, if any, and the API path behind it. */
function route(url) {
  for (const [prefix, mode] of Object.entries(BUFFERING)) {
    if (url.startsWith(`${prefix}/`)) return { mode, path: url.slice(prefix.length) };
  }
  return { mode: null, path: url };
}

function tunnel(req, socket, head, upstream) {
  if (route(req.url).mode) {
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    return;
  }
  const upSocket = net.connect(Number(upstream.port), upstream.hostname, () => {
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i];
      lines.push(`${name}: ${name.toLowerCase() === 'host' ? upstream.host : req.rawHeaders[i + 1]}`);
    }
    upSocket.write(`${lines.join('\r\n')}\r\n\r\n`);
    if (head.length) upSocket.write(head);
    upSocket.pipe(socket);
    socket.pipe(upSocket);
  });
  upSocket.on('error', () => socket.destroy());
  socket.on('error', () => upSocket.destroy());
  upSocket.on('close', () => socket.destroy());
  socket.on('close', () => upSocket.destroy());
}

/** Starts the server; resolves to {url, close()}. */
export function startDevServer({ upstream, port = 0, host = '127.0.0.1' }) {
  const target = new URL(upstream);
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    const { mode, path } = route(req.url);
    if (API.test(path)) proxy(req, res, target, path, mode);
    else serveFile(req, res);
  });
  server.on('upgrade', (req, socket, head) => tunnel(req, socket, head, target));
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: bound } = server.address();
      resolve({
        url: `http://${host}:${bound}`,
        close: () => new Promise((done) => {
          for (const socket of sockets) socket.destroy();
          server.close(done);
        }),
      });
    });
  });
}

function argument(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const upstream = argument('upstream', 'http://127.0.0.1:8080');
  const server = await startDevServer({ upstream, port: Number(argument('port', '8000')) });
  process.stdout.write(`demo server listening on ${server.url} (API: ${upstream})\n`);
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => server.close().then(() => process.exit(0)));
  }
}
