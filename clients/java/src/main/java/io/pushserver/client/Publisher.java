package io.pushserver.client;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.ProtocolException;
import java.net.URL;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.UUID;

/**
 * Publishes idempotently (docs/protocol.md, "Idempotency keys and unknown outcomes"): every
 * message carries a key, a random UUID unless given, and a publish is sent again with the same
 * body and keys after a network error, a 429 or a 5xx, so a retry never publishes twice.
 */
final class Publisher {
    private final String base;
    private final PushOptions options;
    private final Random jitter = new Random();

    Publisher(String base, PushOptions options) {
        this.base = base;
        this.options = options;
    }

    /** A new random key: a version 4 UUID, from the platform's SecureRandom. */
    static String newKey() {
        return UUID.randomUUID().toString();
    }

    PublishResult one(String channel, String body, String contentType, String idempotencyKey)
            throws IOException {
        String key = idempotencyKey != null ? idempotencyKey : newKey();
        URL url = new URL(base + "/pub/" + Http.pathSegment(channel));
        Object answer = send(url, contentType, body, key, Collections.singletonList(key));
        return PublishResult.fromJson(Http.object(answer));
    }

    List<PublishResult> batch(List<PublishItem> items) throws IOException {
        List<String> keys = new ArrayList<String>();
        StringBuilder body = new StringBuilder("[");
        for (PublishItem item : items) {
            String key = item.idempotencyKey() != null ? item.idempotencyKey() : newKey();
            keys.add(key);
            body.append(body.length() == 1 ? "" : ",")
                    .append("{\"channel\":").append(Json.write(item.channel()))
                    .append(",\"data\":").append(item.json())
                    .append(",\"idempotency_key\":").append(Json.write(key)).append('}');
        }
        Object answer = send(new URL(base + "/pub"), "application/json", body.append(']').toString(),
                null, keys);
        if (!(answer instanceof List)) {
            throw new ProtocolException("a batch is answered with a JSON array");
        }
        List<PublishResult> results = new ArrayList<PublishResult>();
        for (Object one : (List<?>) answer) {
            results.add(PublishResult.fromJson(Http.object(one)));
        }
        return results;
    }

    /**
     * Sends until answered 2xx, a final error, or {@code publishRetries} retries; waits between
     * tries like a subscription's reconnects, never less than a {@code Retry-After}.
     */
    private Object send(URL url, String contentType, String body, String headerKey, List<String> keys)
            throws IOException {
        byte[] bytes = body.getBytes(Http.UTF_8);
        Backoff backoff = new Backoff(options.reconnectMinMillis(), options.reconnectMaxMillis(), jitter);
        boolean unknown = false;
        for (int attempts = 1; ; attempts++) {
            IOException failure;
            try {
                return attempt(url, contentType, bytes, headerKey);
            } catch (PushException e) {
                if (!e.isRetryable()) {
                    throw e;
                }
                failure = e;
                unknown |= e.status() >= 500 && e.status() != 503; // 503: not published
            } catch (IOException e) {
                failure = e; // no answer: the server may have published it
                unknown = true;
            }
            if (attempts > options.publishRetries()) {
                throw unknown ? new OutcomeUnknownException(keys, attempts, failure) : failure;
            }
            long retryAfter = failure instanceof PushException
                    ? ((PushException) failure).retryAfterSeconds() * 1000 : 0;
            pause(Math.max(backoff.next(), retryAfter));
        }
    }

    private Object attempt(URL url, String contentType, byte[] body, String key) throws IOException {
        HttpURLConnection conn = Http.open(url, options.connectTimeoutMillis(),
                Http.REQUEST_READ_TIMEOUT_MILLIS);
        conn.setRequestMethod("POST");
        conn.setDoOutput(true);
        // Streaming mode also stops HttpURLConnection from silently sending a POST again when
        // its answer is lost: every retry is this class's, counted and with the same key.
        conn.setFixedLengthStreamingMode(body.length);
        conn.setRequestProperty("Content-Type", contentType);
        if (key != null) {
            conn.setRequestProperty("Idempotency-Key", key);
        }
        if (options.publishKey() != null) {
            conn.setRequestProperty("Authorization", "Bearer " + options.publishKey());
        }
        OutputStream out = conn.getOutputStream();
        try {
            out.write(body);
        } finally {
            out.close();
        }
        int status = Http.status(conn);
        if (status / 100 != 2) {
            throw Http.error(conn, status);
        }
        return Http.readJson(conn.getInputStream());
    }

    private static void pause(long millis) throws InterruptedIOException {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted between publish attempts");
        }
    }
}
