/*
 * pushserver JavaScript client (wire protocol v1, see docs/protocol.md).
 *
 * This file is the single source of both builds: it is written in ES5 syntax so that the
 * classic build runs in old Android WebViews, and `build.mjs` wraps it into the ES module and
 * the UMD/global script. It only declares createPushClient(root); `root` is the global object
 * whose WebSocket, EventSource, fetch, XMLHttpRequest and document are used when present.
 */
function createPushClient(root) {
  'use strict';

  var CHANNEL_RE = /^[A-Za-z0-9_.:@-]{1,128}$/;
  var HTTP_STREAMS = { sse: true, stream: true };
  var HEAD_TIMEOUT_MS = 15000; /* the immediate long-poll that takes a new subscription's cursor */
  var MAX_BETTER_DELAY_MS = 1800000; /* the longest wait before trying a better transport again */
  /* docs/protocol.md's numbers: the first reconnect delay, its ceiling, the long-poll cap */
  var DEFAULTS = { minDelay: 250, maxDelay: 30000, pollLimit: 100 };
  var jsonpSeq = 0;

  function noop() {}

  function own(obj, key) {
    return Object.prototype.hasOwnProperty.call(obj, key);
  }

  function option(options, key, fallback) {
    return options && own(options, key) && options[key] !== undefined ? options[key] : fallback;
  }

  /* User callbacks must not break a transport's read loop, nor be swallowed. */
  function callUser(fn, args) {
    if (typeof fn !== 'function') {
      return;
    }
    try {
      fn.apply(null, args);
    } catch (e) {
      root.setTimeout(function () { throw e; }, 0);
    }
  }

  function query(params) {
    var parts = [];
    for (var key in params) {
      if (own(params, key) && params[key] !== null && params[key] !== undefined) {
        parts.push(key + '=' + encodeURIComponent(String(params[key])));
      }
    }
    return parts.length ? '?' + parts.join('&') : '';
  }

  function trimBase(baseUrl) {
    return String(baseUrl).replace(/\/+$/, '');
  }

  function checkChannel(name) {
    if (!CHANNEL_RE.test(name)) {
      throw new Error('bad channel name: ' + name);
    }
    return name;
  }

  /* The runtime's capabilities; options may inject or disable each of them (false). */
  function capabilities(options) {
    var fetchOpt = option(options, 'fetch', root.fetch ? function (url, init) {
      return root.fetch(url, init);
    } : null);
    var fetchFn = fetchOpt || null;
    var wsCtor = option(options, 'WebSocket', root.WebSocket) || null;
    var esCtor = option(options, 'EventSource', root.EventSource) || null;
    var xhrCtor = option(options, 'XMLHttpRequest', root.XMLHttpRequest) || null;
    var doc = option(options, 'document', root.document) || null;
    return {
      fetch: fetchFn,
      fetchStreams: !!(fetchFn && root.AbortController && root.TextDecoder),
      WebSocket: wsCtor,
      EventSource: esCtor,
      XMLHttpRequest: xhrCtor,
      document: doc && doc.createElement ? doc : null
    };
  }

  function supported(caps, name) {
    switch (name) {
      case 'ws': return !!caps.WebSocket;
      case 'sse': return !!(caps.EventSource || caps.fetchStreams);
      case 'stream': return !!(caps.fetchStreams || caps.XMLHttpRequest);
      case 'longpoll': return !!(caps.fetch || caps.XMLHttpRequest);
      case 'jsonp': return !!caps.document;
      default: return false;
    }
  }

  /* auto: WebSocket, then EventSource where fetch cannot stream (EventSource hides heartbeats,
   * so where fetch can, a fetch stream replaces it), then streaming, then long-poll; JSONP only
   * where no HTTP request object exists, so a client that starts offline never ends on it. */
  function candidates(caps, transport) {
    if (transport !== 'auto') {
      if (!supported(caps, transport)) {
        throw new Error('transport not available in this runtime: ' + transport);
      }
      return [transport];
    }
    var ladder = [];
    if (caps.WebSocket) { ladder.push('ws'); }
    if (caps.EventSource && !caps.fetchStreams) { ladder.push('sse'); }
    if (supported(caps, 'stream')) { ladder.push('stream'); }
    if (supported(caps, 'longpoll')) {
      ladder.push('longpoll');
    } else if (supported(caps, 'jsonp')) {
      ladder.push('jsonp');
    }
    if (!ladder.length) {
      throw new Error('no transport available in this runtime');
    }
    return ladder;
  }

  /* Retry-After as docs/protocol.md reads it: ASCII digits are seconds, anything else (an HTTP
   * date, a sign, decimals) is ignored. */
  function parseRetryAfter(value) {
    var digits = /^[ \t]*([0-9]+)[ \t]*$/.exec(value === null || value === undefined ? '' : value);
    return digits ? parseInt(digits[1], 10) : null;
  }

  /* An HTTP error as the reconnect logic needs it: final unless retrying can help. */
  function httpError(status, retryAfter, bodyText) {
    var err = { status: status, retryAfter: parseRetryAfter(retryAfter), error: 'http_' + status };
    try {
      var body = JSON.parse(bodyText);
      if (body && body.error) {
        err.error = body.error;
        err.message = body.message;
      }
    } catch (e) { /* not a JSON error body */ }
    err.message = err.message || 'HTTP ' + status;
    err.final = status >= 400 && status < 500 && status !== 408 && status !== 429;
    return err;
  }

  function networkError(e) {
    return { error: 'network', message: String(e && e.message || e || 'connection lost') };
  }

  /* One JSON request (long-poll, publish) over fetch, else XHR; done(err, body). An error after
   * a 2xx head arrived says so (`afterHead`): the answer was cut off in its body. */
  function requestJson(caps, method, url, headers, body, timeoutMs, done) {
    var finished = false;
    var headSeen = false;
    var timer = null;
    var abortFn = noop;
    function finish(err, value) {
      if (finished) { return; }
      finished = true;
      if (timer) { root.clearTimeout(timer); }
      if (err && headSeen) { err.afterHead = true; }
      done(err, value);
    }
    function settle(status, retryAfter, text) {
      if (status >= 200 && status < 300) {
        try {
          finish(null, JSON.parse(text));
        } catch (e) {
          finish({ error: 'bad_response', message: 'response is not JSON' });
        }
      } else {
        finish(httpError(status, retryAfter, text));
      }
    }
    if (timeoutMs) {
      timer = root.setTimeout(function () {
        abortFn();
        finish({ error: 'timeout', message: 'request timed out' });
      }, timeoutMs);
    }
    if (caps.fetch) {
      var ctrl = root.AbortController ? new root.AbortController() : null;
      abortFn = function () { if (ctrl) { ctrl.abort(); } };
      var init = { method: method, headers: headers, cache: 'no-store' };
      if (body !== null) { init.body = body; }
      if (ctrl) { init.signal = ctrl.signal; }
      caps.fetch(url, init).then(function (res) {
        headSeen = res.status >= 200 && res.status < 300;
        return res.text().then(function (text) {
          settle(res.status, res.headers.get('Retry-After'), text);
        });
      })['catch'](function (e) { finish(networkError(e)); });
    } else {
      var xhr = new caps.XMLHttpRequest();
      abortFn = function () { xhr.onreadystatechange = noop; xhr.abort(); };
      xhr.open(method, url, true);
      for (var name in headers) {
        if (own(headers, name)) { xhr.setRequestHeader(name, headers[name]); }
      }
      xhr.onreadystatechange = function () {
        if (xhr.readyState === 2 || xhr.readyState === 3) {
          headSeen = xhr.status >= 200 && xhr.status < 300;
        }
        if (xhr.readyState !== 4) { return; }
        if (xhr.status === 0) {
          finish(networkError('connection lost'));
        } else {
          settle(xhr.status, xhr.getResponseHeader('Retry-After'), xhr.responseText);
        }
      };
      xhr.send(body);
    }
    return {
      abort: function () {
        abortFn();
        finished = true;
        if (timer) { root.clearTimeout(timer); }
      }
    };
  }

  /* Splits a growing text stream into lines, keeping the unfinished tail. */
  function lineSplitter(onLine) {
    var tail = '';
    return function (chunk) {
      var text = tail + chunk;
      var start = 0;
      var end = text.indexOf('\n');
      while (end !== -1) {
        var line = text.substring(start, end);
        onLine(line.charAt(line.length - 1) === '\r' ? line.substring(0, line.length - 1) : line);
        start = end + 1;
        end = text.indexOf('\n', start);
      }
      tail = text.substring(start);
    };
  }

  function ndjsonParser(link) {
    return lineSplitter(function (line) {
      if (/\S/.test(line)) {
        link.json(line);
      }
    });
  }

  /* text/event-stream framing, as an EventSource reads it: `data:` lines up to a blank line make
   * one event, of the type its `event:` field names (`message` without one), whose id is the
   * last `id:` seen. A `message` event carries an envelope or a control event; an event named
   * for a channel is a message of the compact framing. */
  function sseParser(link) {
    var data = [];
    var type = '';
    var lastId = '';
    return lineSplitter(function (line) {
      if (line === '') {
        if (data.length) {
          sseEvent(link, type, data.join('\n'), lastId);
        }
        data = [];
        type = '';
        return;
      }
      var colon = line.indexOf(':');
      var field = colon === -1 ? line : line.substring(0, colon);
      var value = colon === -1 ? '' : line.substring(colon + (line.charAt(colon + 1) === ' ' ? 2 : 1));
      if (field === 'data') {
        data.push(value);
      } else if (field === 'event') {
        type = value;
      } else if (field === 'id') {
        lastId = value;
      }
    });
  }

  function sseEvent(link, type, data, lastId) {
    if (type === '' || type === 'message') {
      link.json(data);
    } else {
      link.compact(type, data, lastId);
    }
  }

  /* A message of the compact SSE framing (?compact=1): its channel is the event's type, its
   * cursor the event's id and its data the payload alone. Its id is read from the channel's
   * part of the cursor (`channel:EPOCH:ID`; a name may hold ':', the epoch never does); the
   * framing carries no publish time, so `ts` is null. Throws on data that is not JSON. */
  function compactMessage(channel, data, cursor) {
    var id = null;
    var parts = String(cursor).split(',');
    for (var i = 0; i < parts.length; i++) {
      var rest = parts[i].substring(channel.length + 1).split(':');
      if (parts[i].indexOf(channel + ':') === 0 && rest.length === 2) {
        id = parseInt(rest[1], 10);
      }
    }
    return { channel: channel, id: id, ts: null, data: JSON.parse(data), cursor: cursor };
  }

  /* A held HTTP response read chunk by chunk: fetch streams, else XHR readyState 3 (whose
   * responseText only grows, so the XHR is renewed after xhrMaxBytes). */
  function httpStream(sub, url, link, onChunk) {
    var caps = sub._caps;
    var closed = false;
    if (caps.fetchStreams) {
      var ctrl = new root.AbortController();
      caps.fetch(url, { signal: ctrl.signal, cache: 'no-store' }).then(function (res) {
        if (closed) { return null; }
        if (res.status !== 200) {
          return res.text().then(function (text) {
            link.end(httpError(res.status, res.headers.get('Retry-After'), text));
          });
        }
        link.open();
        var reader = res.body.getReader();
        var decoder = new root.TextDecoder();
        function pump() {
          return reader.read().then(function (step) {
            if (closed) { return null; }
            if (step.done) {
              link.end({ error: 'closed', message: 'the server closed the stream' });
              return null;
            }
            link.bytes();
            onChunk(decoder.decode(step.value, { stream: true }));
            return pump();
          });
        }
        return pump();
      })['catch'](function (e) {
        if (!closed) { link.end(networkError(e)); }
      });
      return { close: function () { closed = true; ctrl.abort(); } };
    }
    var xhr = new caps.XMLHttpRequest();
    var seen = 0;
    xhr.open('GET', url, true);
    xhr.onreadystatechange = function () {
      if (closed) { return; }
      var state = xhr.readyState;
      if (state >= 2 && xhr.status === 200 && seen === 0 && !link.opened) {
        link.open();
      }
      if (state >= 3 && xhr.status === 200) {
        var text = xhr.responseText;
        if (text.length > seen) {
          var chunk = text.substring(seen);
          seen = text.length;
          link.bytes();
          onChunk(chunk);
        }
        if (seen > sub._opts.xhrMaxBytes && state === 3) {
          link.end({ error: 'rotate', rotate: true, message: 'reconnecting to free memory' });
          return;
        }
      }
      if (state === 4) {
        if (xhr.status === 200) {
          link.end({ error: 'closed', message: 'the server closed the stream' });
        } else if (xhr.status === 0) {
          link.end(networkError('connection lost'));
        } else {
          link.end(httpError(xhr.status, xhr.getResponseHeader('Retry-After'), xhr.responseText));
        }
      }
    };
    xhr.send(null);
    return {
      close: function () {
        closed = true;
        xhr.onreadystatechange = noop;
        xhr.abort();
      }
    };
  }

  /* What a wire object is: 'message' (an envelope has no type), 'gap', 'reconnect', 'expired',
   * or null for a control type this client does not know (the protocol says ignore it). */
  function eventKind(obj) {
    if (obj.type === undefined) { return 'message'; }
    return obj.type === 'gap' || obj.type === 'reconnect' || obj.type === 'expired' ? obj.type : null;
  }

  /* A long-poll answer's events in order, then its cursor. */
  function deliverAnswer(body, link) {
    var messages = (body && body.messages) || [];
    for (var i = 0; i < messages.length; i++) {
      link.event(messages[i]);
    }
    if (body && body.cursor) { link.cursor(body.cursor); }
  }

  /* Transports: open(sub, link) -> {close, liveness}. liveness says what the heartbeat
   * watchdog can observe: 'bytes' (every heartbeat), 'open' (only the connection opening). */
  var OPENERS = {
    stream: function (sub, link) {
      var conn = httpStream(sub, sub._url('stream', { pad: sub._opts.pad || null }),
        link, ndjsonParser(link));
      conn.liveness = 'bytes';
      return conn;
    },

    sse: function (sub, link) {
      var url = sub._url('sse', { compact: sub._opts.compact ? 1 : null });
      if (!sub._caps.EventSource) {
        var conn = httpStream(sub, url, link, sseParser(link));
        conn.liveness = 'bytes';
        return conn;
      }
      var es = new sub._caps.EventSource(url);
      var channels = sub.channels;
      function onCompact(ev) { link.compact(ev.type, ev.data, ev.lastEventId); }
      for (var i = 0; i < channels.length; i++) {
        if (channels[i] !== 'message') { es.addEventListener(channels[i], onCompact); }
      }
      es.onopen = function () { link.open(); };
      es.onmessage = function (ev) { link.json(ev.data); };
      es.onerror = function () {
        /* EventSource would retry by itself with a stale URL; resume on our terms instead. */
        link.end(networkError('event stream failed'));
      };
      return {
        liveness: 'open',
        close: function () {
          es.onopen = es.onmessage = es.onerror = null;
          for (var j = 0; j < channels.length; j++) {
            es.removeEventListener(channels[j], onCompact);
          }
          es.close();
        }
      };
    },

    ws: function (sub, link) {
      var ws = new sub._caps.WebSocket(sub._url('ws', {}).replace(/^http/, 'ws'));
      var canSeePings = typeof ws.on === 'function';
      if (canSeePings) {
        ws.on('ping', function () { link.bytes(); });
      }
      ws.onopen = function () { link.open(); };
      ws.onmessage = function (ev) {
        if (typeof ev.data === 'string') {
          link.json(ev.data);
        }
      };
      ws.onerror = function () { link.end(networkError('websocket error')); };
      ws.onclose = function (ev) {
        link.end({ error: 'closed', message: 'websocket closed (' + ev.code + ')' });
      };
      return {
        liveness: canSeePings ? 'bytes' : 'open',
        close: function () {
          ws.onopen = ws.onmessage = ws.onclose = null;
          ws.onerror = noop;
          try { ws.close(); } catch (e) { /* already closing */ }
        }
      };
    },

    longpoll: function (sub, link) {
      return pollLoop(sub, link, false);
    },

    jsonp: function (sub, link) {
      return pollLoop(sub, link, true);
    }
  };

  /* The `limit` every long-poll sends (docs/protocol.md, "How a client sizes its polls"): a
   * link that drops every few kilobytes gets answers through once they are small enough. */
  function PollLimit(cap) {
    this.cap = cap;
    this.value = cap;
  }

  /* An answer that arrived whole: ask for more again, up to the server's cap. */
  PollLimit.prototype.answered = function () {
    this.value = Math.min(this.cap, this.value * 2);
  };

  /* An answer cut off after its head (or, for JSONP, any failed poll): ask for half. */
  PollLimit.prototype.cut = function () {
    this.value = Math.max(1, Math.floor(this.value / 2));
  };

  /* Reconnect delays (docs/protocol.md, "Reconnect backoff"): failed attempts in a row are
   * counted, retry n waits min(maxDelay, minDelay * 2^(n-1)) ms scaled by a random factor in
   * [0.5, 1], never less than a Retry-After; an attempt that made progress restarts the count. */
  function Backoff(minDelay, maxDelay) {
    this.minDelay = minDelay;
    this.maxDelay = maxDelay;
    this.failures = 0;
  }

  /* The range (ms) the delay before retry `attempt` is drawn from, before any Retry-After. */
  Backoff.prototype.bounds = function (attempt) {
    var high = Math.min(this.maxDelay, this.minDelay * Math.pow(2, attempt - 1));
    return [high / 2, high];
  };

  Backoff.prototype.progress = function () {
    this.failures = 0;
  };

  /* Counts a failed attempt: the delay (ms) before the next, given its Retry-After (s) or null. */
  Backoff.prototype.failed = function (retryAfter) {
    this.failures++;
    var range = this.bounds(this.failures);
    var delay = range[0] + Math.random() * (range[1] - range[0]);
    return retryAfter === null || retryAfter === undefined ? delay : Math.max(delay, retryAfter * 1000);
  };

  /* Sends one long-poll (JSONP when asked) from the subscription's cursor with its limit, and
   * adapts the limit to how the answer came: done(err, body). */
  function poll(sub, jsonp, timeout, timeoutMs, done) {
    var limit = sub._limit;
    var url = sub._url('lp', { timeout: timeout, limit: limit.value });
    function adapt(err, body) {
      if (!err) {
        limit.answered();
      } else if (err.afterHead || (jsonp && (err.error === 'network' || err.error === 'timeout'))) {
        limit.cut();
      }
      done(err, body);
    }
    return jsonp ?
      jsonpRequest(sub._caps.document, url, timeoutMs, adapt) :
      requestJson(sub._caps, 'GET', url, {}, null, timeoutMs, adapt);
  }

  /* Long-poll and JSONP: one request after another, each from the cursor the last returned. */
  function pollLoop(sub, link, jsonp) {
    var current = null;
    var closed = false;
    function next() {
      if (closed) { return; }
      var timeout = sub._opts.pollTimeout;
      current = poll(sub, jsonp, timeout, (timeout + 15) * 1000,
        function (err, body) {
          current = null;
          if (closed) { return; }
          if (err) {
            if (err.afterHead) { link.bytes(); }
            link.end(err);
            return;
          }
          if (!link.opened) { link.open(); }
          deliverAnswer(body, link);
          if (closed) { return; }
          /* next tick: lets the HTTP stack put the kept-alive connection back for reuse */
          root.setTimeout(next, 0);
        });
    }
    next();
    return {
      liveness: 'none',
      close: function () {
        closed = true;
        if (current) { current.abort(); }
      }
    };
  }

  function jsonpRequest(doc, url, timeoutMs, done) {
    var registry = root.__pushclient || (root.__pushclient = {});
    var id = 'c' + (++jsonpSeq);
    var script = doc.createElement('script');
    var finished = false;
    var timer = null;
    function finish(err, body) {
      if (finished) { return; }
      finished = true;
      root.clearTimeout(timer);
      registry[id] = noop; /* a late response must still find a function */
      script.onerror = script.onload = null;
      if (script.parentNode) { script.parentNode.removeChild(script); }
      if (done) { done(err, body); }
    }
    registry[id] = function (body) {
      finish(null, body);
      delete registry[id];
    };
    timer = root.setTimeout(function () {
      finish({ error: 'timeout', message: 'JSONP request timed out' });
    }, timeoutMs);
    script.onerror = function () { finish(networkError('JSONP request failed')); };
    /* A script that loaded and ran without calling back was not a whole answer (Chromium does
     * this behind links that cut connections): fail now instead of at the timeout. */
    script.onload = function () { finish(networkError('JSONP answer did not call back')); };
    script.async = true;
    script.src = url + (url.indexOf('?') === -1 ? '?' : '&') + 'callback=__pushclient.' + id;
    (doc.getElementsByTagName('head')[0] || doc.documentElement).appendChild(script);
    return { abort: function () { done = null; finish(null, null); } };
  }

  /**
   * A subscription to 1..64 channels that delivers every message once, in order, across
   * reconnects, and reports what it could not deliver through onGap.
   */
  function PushSubscription(baseUrl, channels, options) {
    if (!(this instanceof PushSubscription)) {
      return new PushSubscription(baseUrl, channels, options);
    }
    options = options || {};
    var list = typeof channels === 'string' ? channels.split(',') : channels;
    if (!list || !list.length) {
      throw new Error('a subscription needs at least one channel');
    }
    for (var i = 0; i < list.length; i++) { checkChannel(list[i]); }
    this.baseUrl = trimBase(baseUrl);
    this.channels = list.slice();
    this.cursor = option(options, 'cursor', null);
    this.transport = null;
    this.closed = false;
    this._opts = {
      history: option(options, 'history', null),
      token: option(options, 'token', null),
      pad: option(options, 'pad', 0),
      compact: option(options, 'compact', true),
      xhrMaxBytes: option(options, 'xhrMaxBytes', 1048576),
      heartbeat: option(options, 'heartbeat', 20),
      pollTimeout: option(options, 'pollTimeout', 30),
      betterAfter: option(options, 'betterAfter', 60000),
      onMessage: options.onMessage,
      onGap: options.onGap,
      onStatus: options.onStatus
    };
    this._caps = capabilities(options);
    this._auto = option(options, 'transport', 'auto') === 'auto';
    this._ladder = candidates(this._caps, option(options, 'transport', 'auto'));
    this._limit = new PollLimit(option(options, 'pollLimit', DEFAULTS.pollLimit));
    this._backoff = new Backoff(option(options, 'minDelay', DEFAULTS.minDelay),
      option(options, 'maxDelay', DEFAULTS.maxDelay));
    this._rung = 0;
    this._betterDelay = this._opts.betterAfter;
    this._betterTimer = null;
    this._unopened = 0;
    this._stalls = 0;
    this._generation = 0;
    this._conn = null;
    this._watchdog = null;
    this._retryTimer = null;
    this._connect();
  }

  PushSubscription.prototype._status = function (status, info) {
    callUser(this._opts.onStatus, [status, info || {}]);
  };

  PushSubscription.prototype._url = function (kind, extra) {
    var params = {};
    var token = this._opts.token;
    if (this.cursor) {
      params.cursor = this.cursor;
    } else if (this._opts.history !== null) {
      params.history = this._opts.history;
    }
    if (token) {
      params.token = typeof token === 'function' ? token() : token;
    }
    for (var key in extra) {
      if (own(extra, key)) { params[key] = extra[key]; }
    }
    return this.baseUrl + '/' + kind + '/' + this.channels.join(',') + query(params);
  };

  PushSubscription.prototype._connect = function () {
    var self = this;
    var generation = ++this._generation;
    var name = this._ladder[this._rung];
    var watchMs = this._opts.heartbeat * 2500;
    var link = { opened: false, received: 0 };
    var conn = null;
    function live() { return generation === self._generation && !self.closed; }
    function watch() {
      root.clearTimeout(self._watchdog);
      self._watchdog = null;
      if (conn && (conn.liveness === 'bytes' || (conn.liveness === 'open' && !link.opened))) {
        self._watchdog = root.setTimeout(function () {
          if (live()) {
            link.end({ error: 'heartbeat', silent: link.received === 0,
              message: 'no heartbeat for ' + watchMs / 1000 + ' s' });
          }
        }, watchMs);
      }
    }
    link.open = function () {
      if (!live()) { return; }
      link.opened = true;
      self._unopened = 0;
      self._status('open', { transport: name });
      watch();
    };
    link.bytes = function () {
      if (!live()) { return; }
      link.received++;
      watch();
    };
    link.json = function (text) {
      var obj;
      try {
        obj = JSON.parse(text);
      } catch (e) {
        link.end({ error: 'bad_response', message: 'not JSON: ' + String(text).substring(0, 80) });
        return;
      }
      link.event(obj);
    };
    link.compact = function (channel, data, cursor) {
      var obj;
      try {
        obj = compactMessage(channel, data, cursor);
      } catch (e) {
        link.end({ error: 'bad_response', message: 'not JSON: ' + String(data).substring(0, 80) });
        return;
      }
      link.event(obj);
    };
    link.event = function (obj) {
      if (live() && obj && typeof obj === 'object') {
        self._event(obj, link);
      }
    };
    link.cursor = function (cursor) {
      if (live()) { self.cursor = cursor; }
    };
    link.end = function (err) {
      if (live()) { self._ended(name, link, err || {}); }
    };
    function open() {
      try {
        conn = OPENERS[name](self, link);
      } catch (e) {
        conn = null;
        link.end(networkError(e));
        return;
      }
      if (live()) {
        self._conn = conn;
        watch();
      } else {
        conn.close();
      }
    }
    this.transport = name;
    this._status('connecting', { transport: name, cursor: this.cursor });
    if (this.cursor) {
      open();
    } else {
      this._head(name, link, live, open);
    }
  };

  /* A stream carries its first cursor with its first message, and a first long-poll is held
   * until one comes: a drop before then would leave nothing to resume from. So a subscription
   * without a cursor first takes the head cursor (and any `history` messages) from an
   * immediate long-poll, then opens its transport from there. */
  PushSubscription.prototype._head = function (name, link, live, open) {
    var self = this;
    function done(err, body) {
      if (!live()) { return; }
      self._conn = null;
      if (err) {
        if (err.afterHead) { link.bytes(); }
        link.end(err);
        return;
      }
      deliverAnswer(body, link);
      if (live()) { open(); }
    }
    var request;
    try {
      request = poll(this, name === 'jsonp', 0, HEAD_TIMEOUT_MS, done);
    } catch (e) {
      link.end(networkError(e));
      return;
    }
    if (live()) {
      this._conn = { liveness: 'none', close: function () { request.abort(); } };
    }
  };

  PushSubscription.prototype._event = function (obj, link) {
    if (obj.cursor) {
      this.cursor = obj.cursor;
    }
    var kind = eventKind(obj);
    if (kind === 'message') {
      this._backoff.progress();
      callUser(this._opts.onMessage, [obj]);
    } else if (kind === 'gap') {
      callUser(this._opts.onGap, [obj]);
    } else if (kind === 'reconnect') {
      link.end({ error: 'reconnect', message: 'the server asked to reconnect' });
    } else if (kind === 'expired') {
      this._status('expired', {});
      link.end({ error: 'expired', message: 'the subscription token expired' });
    }
  };

  /* Drops the current connection so that nothing it still reports is heard. */
  PushSubscription.prototype._drop = function () {
    this._generation++;
    root.clearTimeout(this._watchdog);
    this._watchdog = null;
    var conn = this._conn;
    this._conn = null;
    if (conn) { conn.close(); }
  };

  PushSubscription.prototype._ended = function (name, link, err) {
    var self = this;
    this._drop();
    if (err.final) {
      this._status('error', err);
      this.close();
      return;
    }
    if (this._auto) {
      this._climbDown(name, link, err);
    }
    var delay = 0;
    if (!err.rotate) {
      if (link.opened || link.received) { this._backoff.progress(); }
      delay = this._backoff.failed(err.retryAfter);
    }
    this._status('reconnecting', { transport: name, delay: delay, reason: err });
    this._retryTimer = root.setTimeout(function () {
      self._retryTimer = null;
      if (!self.closed) { self._connect(); }
    }, delay);
  };

  /* auto: an HTTP stream whose heartbeats never arrive (or stop twice in a row) sits behind a
   * buffering proxy, so long-poll; a transport that fails twice to open gives way to the next. */
  PushSubscription.prototype._climbDown = function (name, link, err) {
    var from = this._rung;
    var longpoll = this._ladder.indexOf('longpoll');
    var stalled = err.error === 'heartbeat' && HTTP_STREAMS[name];
    this._stalls = stalled ? this._stalls + 1 : 0;
    if (stalled && (err.silent || this._stalls >= 2) && longpoll > this._rung) {
      this._rung = longpoll;
    } else if (!link.opened && !err.retryAfter) {
      this._unopened++;
      if (this._unopened >= 2 && this._rung < this._ladder.length - 1) {
        this._rung++;
      }
    }
    if (this._rung !== from) {
      this._unopened = 0;
      this._stalls = 0;
      this._backoff.progress();
      this._status('fallback', { from: name, to: this._ladder[this._rung], reason: err });
      this._tryBetterLater();
    }
  };

  /* What made a transport fail (a proxy, a network) may be gone later: after betterAfter ms on
   * a lower rung, start again from the best transport; each fall-back after that waits twice
   * as long before the next try. */
  PushSubscription.prototype._tryBetterLater = function () {
    var self = this;
    if (this._betterTimer || this.closed) { return; }
    var delay = this._betterDelay;
    this._betterDelay = Math.min(MAX_BETTER_DELAY_MS, delay * 2);
    this._betterTimer = root.setTimeout(function () {
      self._betterTimer = null;
      if (self.closed || self._rung === 0) { return; }
      var from = self._ladder[self._rung];
      self._drop();
      root.clearTimeout(self._retryTimer);
      self._retryTimer = null;
      self._rung = 0;
      self._unopened = 0;
      self._stalls = 0;
      self._backoff.progress();
      self._status('upgrade', { from: from, to: self._ladder[0] });
      self._connect();
    }, delay);
  };

  /** Stops the subscription for good; `cursor` stays readable to resume later. */
  PushSubscription.prototype.close = function () {
    if (this.closed) { return; }
    this._drop();
    this.closed = true;
    root.clearTimeout(this._retryTimer);
    this._retryTimer = null;
    root.clearTimeout(this._betterTimer);
    this._betterTimer = null;
    this._status('closed', { cursor: this.cursor });
  };

  /**
   * A publish that may have been made although no answer said so (a 504 outcome_unknown, or a
   * connection lost after the request went out) and that ran out of retries. Publishing again
   * with the same `idempotencyKeys` is safe: the server answers the original ids.
   */
  function OutcomeUnknownError(message, keys) {
    this.message = message;
    this.stack = new Error(message).stack;
    this.code = 'outcome_unknown';
    this.idempotencyKeys = keys;
  }
  OutcomeUnknownError.prototype = Object.create(Error.prototype);
  OutcomeUnknownError.prototype.constructor = OutcomeUnknownError;
  OutcomeUnknownError.prototype.name = 'OutcomeUnknownError';

  /* A fresh idempotency key, a random UUID (v4) from the runtime's CSPRNG: crypto.randomUUID,
   * else crypto.getRandomValues (older browsers and WebViews; msCrypto in IE 11). Without
   * either no key is safe from collisions, so the caller must give one. */
  function newKey(crypto) {
    if (crypto && typeof crypto.randomUUID === 'function') {
      return crypto.randomUUID();
    }
    if (!crypto || typeof crypto.getRandomValues !== 'function') {
      throw new Error('this runtime has no crypto.getRandomValues: pass idempotency keys');
    }
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40; /* version 4 */
    bytes[8] = (bytes[8] & 0x3f) | 0x80; /* RFC 4122 variant */
    var hex = '';
    for (var i = 0; i < 16; i++) {
      hex += (i === 4 || i === 6 || i === 8 || i === 10 ? '-' : '') +
        (bytes[i] + 0x100).toString(16).substring(1);
    }
    return hex;
  }

  function keySource(options) {
    var crypto = option(options, 'crypto', root.crypto || root.msCrypto);
    return function () { return newKey(crypto); };
  }

  /* Whether a failed attempt may still have published: no answer, or a 5xx other than 503
   * (which says the message was not published). */
  function mayHavePublished(err) {
    return !err.status || (err.status >= 500 && err.status !== 503);
  }

  /* POSTs a publish, trying again with the same body and keys after a network error, a 429 or
   * a 5xx (waiting at least Retry-After), up to `retries` times; a 4xx other than 429 is final.
   * Node-style callback when given, else a Promise (when the runtime has one). */
  function post(url, headers, body, keys, options) {
    var callback = option(options, 'callback', null);
    var caps = capabilities(options);
    var timeoutMs = option(options, 'timeout', 30000);
    var retries = option(options, 'retries', 3);
    var minDelay = option(options, 'minDelay', 250);
    var maxDelay = option(options, 'maxDelay', 30000);
    var token = option(options, 'key', null);
    headers['Content-Type'] = 'application/json';
    if (token) { headers.Authorization = 'Bearer ' + token; }
    function send(done) {
      var delays = new Backoff(minDelay, maxDelay);
      var failures = 0;
      var unknown = false;
      function attempt() {
        requestJson(caps, 'POST', url, headers, body, timeoutMs, function (err, value) {
          if (!err) {
            done(null, value);
            return;
          }
          unknown = unknown || mayHavePublished(err);
          if (!err.final && failures < retries) {
            failures++;
            root.setTimeout(attempt, delays.failed(err.retryAfter));
            return;
          }
          var error = unknown ?
            new OutcomeUnknownError('publish outcome unknown after ' + (failures + 1) +
              ' attempts: ' + err.message, keys) :
            new Error(err.message);
          error.status = err.status;
          error.code = unknown ? 'outcome_unknown' : err.error;
          error.retryAfter = err.retryAfter;
          done(error);
        });
      }
      attempt();
    }
    if (callback || !root.Promise) {
      send(callback || noop);
      return undefined;
    }
    return new root.Promise(function (resolve, reject) {
      send(function (err, value) {
        if (err) { reject(err); } else { resolve(value); }
      });
    });
  }

  /**
   * Publishes one JSON value to a channel (Node, trusted pages): {channel, id, ts, subscribers}.
   * It carries `options.idempotencyKey`, else a new random one, on every try.
   */
  function publish(baseUrl, channel, data, options) {
    var key = option(options, 'idempotencyKey', null) || keySource(options)();
    return post(trimBase(baseUrl) + '/pub/' + checkChannel(channel), { 'Idempotency-Key': key },
      JSON.stringify(data), [key], options);
  }

  /**
   * Publishes [{channel, data, idempotency_key?}, ...] in one request, in order; an item
   * without a key gets a new random one, the same on every try.
   */
  function publishBatch(baseUrl, items, options) {
    var makeKey = keySource(options);
    var batch = [];
    var keys = [];
    for (var i = 0; i < items.length; i++) {
      var key = items[i].idempotency_key || makeKey();
      batch.push({ channel: checkChannel(items[i].channel), data: items[i].data,
        idempotency_key: key });
      keys.push(key);
    }
    return post(trimBase(baseUrl) + '/pub', {}, JSON.stringify(batch), keys, options);
  }

  return {
    PushSubscription: PushSubscription,
    publish: publish,
    publishBatch: publishBatch,
    OutcomeUnknownError: OutcomeUnknownError,
    TRANSPORTS: ['auto', 'ws', 'sse', 'stream', 'longpoll', 'jsonp'],
    /* The sans-I/O units of the wire protocol, which the shared conformance transcripts
     * (tests/conformance/) replay; not needed to subscribe or publish. */
    wire: {
      DEFAULTS: DEFAULTS,
      Backoff: Backoff,
      PollLimit: PollLimit,
      compactMessage: compactMessage,
      deliverAnswer: deliverAnswer,
      eventKind: eventKind,
      httpError: httpError,
      jsonpRequest: jsonpRequest,
      ndjsonParser: ndjsonParser,
      parseRetryAfter: parseRetryAfter,
      requestJson: requestJson,
      sseParser: sseParser
    },
    version: '0.1.0'
  };
}
