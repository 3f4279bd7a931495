package io.pushserver.client;

import java.io.IOException;
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
    private final Publisher publisher;

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
        this.publisher = new Publisher(this.base, this.options);
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
        Http.acceptGzip(conn);
        int status = Http.status(conn);
        if (status != HttpURLConnection.HTTP_OK) {
            throw Http.error(conn, status);
        }
        final String[] next = {cursor};
        Framing.read(Transport.LONGPOLL, Http.body(conn), new Framing.Sink() {
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

    /**
     * Publishes a JSON value given as JSON text (see {@link Json#write} to build one). It carries
     * a new random idempotency key, the same on every retry (see {@link PushOptions#publishRetries}).
     *
     * @throws OutcomeUnknownException when the retries ran out and it may have been published
     */
    public PublishResult publish(String channel, String json) throws IOException {
        return publish(channel, json, null);
    }

    /** Publishes with the given idempotency key (null: a new one), e.g. one an earlier try used. */
    public PublishResult publish(String channel, String json, String idempotencyKey) throws IOException {
        return publisher.one(channel, json, "application/json", idempotencyKey);
    }

    /** Publishes plain text; subscribers receive it as a JSON string. */
    public PublishResult publishText(String channel, String text) throws IOException {
        return publishText(channel, text, null);
    }

    /** Publishes plain text with the given idempotency key (null: a new one). */
    public PublishResult publishText(String channel, String text, String idempotencyKey)
            throws IOException {
        return publisher.one(channel, text, "text/plain; charset=utf-8", idempotencyKey);
    }

    /**
     * Publishes messages in order in one request; all are checked before any is published. Each
     * carries its own idempotency key (its item's, else a new one); the answers are in order.
     *
     * @throws OutcomeUnknownException when the retries ran out and it may have been published
     */
    public List<PublishResult> publishBatch(List<PublishItem> items) throws IOException {
        return publisher.batch(items);
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
}
