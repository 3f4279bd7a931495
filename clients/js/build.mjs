// Generates both builds from src/pushclient.js, the single source (no dependencies):
//   dist/pushclient.js          ES module (import { PushSubscription, publish } ...)
//   dist/pushclient.classic.js  ES5 UMD: CommonJS/AMD, else the global `PushClient`
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const source = readFileSync(join(here, 'src', 'pushclient.js'), 'utf8').trimEnd();
const { version } = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
const banner = `/* pushserver client ${version}, generated from src/pushclient.js by build.mjs: do not edit. */\n`;

const esm = `${banner}${source}

const PushClient = createPushClient(globalThis);
export const { PushSubscription, publish, publishBatch, OutcomeUnknownError, TRANSPORTS, wire } =
  PushClient;
export default PushClient;
`;

const classic = `${banner}(function (root) {
${source}

  var api = createPushClient(root);
  if (typeof module === 'object' && module && module.exports) {
    module.exports = api;
  } else if (typeof define === 'function' && define.amd) {
    define([], function () { return api; });
  } else {
    root.PushClient = api;
  }
}(typeof self !== 'undefined' ? self : typeof global !== 'undefined' ? global : this));
`;

mkdirSync(join(here, 'dist'), { recursive: true });
writeFileSync(join(here, 'dist', 'pushclient.js'), esm);
writeFileSync(join(here, 'dist', 'pushclient.classic.js'), classic);
