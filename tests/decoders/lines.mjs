// Node's own decoders on a gzip-encoded response: `zlib` (http.get piped through
// zlib.createGunzip, as a Node client does by hand) or `fetch` (undici, which decodes by
// itself). Prints each complete line of the decoded body the moment it is decoded, then END
// when the body ended cleanly or ERROR <message>.
import http from 'node:http';
import zlib from 'node:zlib';

const [mode, url, accept] = process.argv.slice(2);
let tail = '';
function take(text) {
  const parts = (tail + text).split('\n');
  tail = parts.pop();
  for (const line of parts) process.stdout.write(`${line}\n`);
}

if (mode === 'zlib') {
  http.get(url, { headers: { 'accept-encoding': 'gzip', accept } }, (res) => {
    const body = res.headers['content-encoding'] === 'gzip' ? res.pipe(zlib.createGunzip()) : res;
    body.setEncoding('utf8');
    body.on('data', take);
    body.on('end', () => process.stdout.write('END\n'));
    body.on('error', (err) => process.stdout.write(`ERROR ${err.message}\n`));
    res.on('error', (err) => process.stdout.write(`ERROR ${err.message}\n`));
  }).on('error', (err) => process.stdout.write(`ERROR ${err.message}\n`));
} else {
  try {
    const res = await fetch(url, { headers: { accept } });
    const decoder = new TextDecoder();
    for await (const chunk of res.body) take(decoder.decode(chunk, { stream: true }));
    process.stdout.write('END\n');
  } catch (err) {
    process.stdout.write(`ERROR ${err.cause ? err.cause.message : err.message}\n`);
  }
}
