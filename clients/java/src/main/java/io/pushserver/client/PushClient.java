package io.pushserver.client;

import java.io.IOException;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A pushserver client: subscribes over long-poll, NDJSON stream or SSE, and publishes. Uses only
 * {@link HttpURLConnection}, so it runs on a plain JVM and on any Android version. Thread-safe.
 */
public final class PushClient {
    private final String base;
    private final PushOptions options;

    public PushClient(URI base) {
        this(base, new PushOptions());
    }

    /** {@code base} is the server's root, e.g. {@code http://push.example.com:8080}; a path is kept. */
    public PushClient(URI base, PushOptions options) {
        String scheme = base.getScheme();
        if (!"http".equalsIgnoreCase(scheme) && !"https".equalsIgnoreCase(scheme)) {
            throw new IllegalArgumentException("base URI must be http or https: " + base);
        }
        String text = base.toString();
        this.base = text.endsWith("/") ? text.substring(0, text.length() - 1) : text;
        this.options = new PushOptions(options);
    }

    /**
     * Subscribes to 1 to 64 channels and starts the subscription's thread.
     *
     * @param cursor where to resume (a cursor saved from {@link Subscription#cursor()} or
     *     {@link Message#cursor()}), or null for only messages published from now on
     */
    public Subscription subscribe(List<String> channels, Transport transport, String cursor,
            SubscriptionListener listener) {
        if (channels.isEmpty()) {
            throw new IllegalArgumentException("subscribe to at least one channel");
        }
        if (transport == null || listener == null) {
            throw new NullPointerException("transport and listener are required");
        }
        Subscription subscription = new Subscription(this, new ArrayList<String>(channels), transport,
                cursor, listener, options);
        subscription.start();
        return subscription;
    }

    /**
     * One long-poll on the calling thread: delivers what follows {@code cursor} (waiting up to
     * {@code timeoutSeconds} when nothing is buffered) to the listener and returns the cursor to
     * save. For periodic catch-up (WorkManager) without a held connection; no retries, no thread.
     */
    public String poll(List<String> channels, String cursor, int timeoutSeconds,
            final SubscriptionListener listener) throws IOException {
        HttpURLConnection conn = Http.open(subscribeUrl(Transport.LONGPOLL, channels, cursor, timeoutSeconds, null),
                options.connectTimeoutMillis(), Http.pollReadTimeoutMillis(timeoutSeconds));
        int status = conn.getResponseCode();
        if (status != HttpURLConnection.HTTP_OK) {
            throw Http.error(conn, status);
        }
        final String[] next = {cursor};
        Framing.read(Transport.LONGPOLL, conn.getInputStream(), new Framing.Sink() {
            @Override
            public void message(Message message) {
                listener.onMessage(message);
                next[0] = message.cursor();
            }

            @Override
            public void gap(Gap gap) {
                listener.onGap(gap);
                next[0] = gap.cursor() != null ? gap.cursor() : next[0];
            }

            @Override
            public void control(String type, Map<String, Object> event) {
                // a long-poll answer has nothing to act on: the next poll carries on
            }

            @Override
            public void cursor(String answer) {
                next[0] = answer;
            }
        });
        return next[0];
    }

    /** Publishes a JSON value given as JSON text (see {@link Json#write} to build one). */
    public PublishResult publish(String channel, String json) throws IOException {
        return post(channel, json, "application/json");
    }

    /** Publishes plain text; subscribers receive it as a JSON string. */
    public PublishResult publishText(String channel, String text) throws IOException {
        return post(channel, text, "text/plain; charset=utf-8");
    }

    /** {@code limit} (long-poll only; null: the server's cap) bounds the events of one answer. */
    URL subscribeUrl(Transport transport, List<String> channels, String cursor, int pollTimeoutSeconds,
            Integer limit) throws IOException {
        StringBuilder query = new StringBuilder();
        Http.param(query, "cursor", cursor);
        if (transport == Transport.LONGPOLL) {
            Http.param(query, "timeout", pollTimeoutSeconds);
            Http.param(query, "limit", limit);
        }
        if (options.history() >= 0) {
            Http.param(query, "history", options.history());
        }
        Http.param(query, "token", options.token());
        StringBuilder url = new StringBuilder(base).append('/').append(transport.path()).append('/');
        for (int i = 0; i < channels.size(); i++) {
            url.append(i == 0 ? "" : ",").append(Http.pathSegment(channels.get(i)));
        }
        return new URL(url.append(query).toString());
    }

    private PublishResult post(String channel, String body, String contentType) throws IOException {
        byte[] bytes = body.getBytes(Http.UTF_8);
        URL url = new URL(base + "/pub/" + Http.pathSegment(channel));
        HttpURLConnection conn = Http.open(url, options.connectTimeoutMillis(),
                Http.REQUEST_READ_TIMEOUT_MILLIS);
        conn.setRequestMethod("POST");
        conn.setDoOutput(true);
        conn.setRequestProperty("Content-Type", contentType);
        if (options.publishKey() != null) {
            conn.setRequestProperty("Authorization", "Bearer " + options.publishKey());
        }
        OutputStream out = conn.getOutputStream();
        try {
            out.write(bytes);
        } finally {
            out.close();
        }
        int status = conn.getResponseCode();
        if (status / 100 != 2) {
            throw Http.error(conn, status);
        }
        return PublishResult.fromJson(Http.readObject(conn.getInputStream()));
    }
}
