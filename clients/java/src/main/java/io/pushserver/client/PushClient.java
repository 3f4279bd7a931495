package io.pushserver.client;

import java.io.IOException;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;

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

    /** {@code base} is the server's root, e.g. {@code http://push.example.com:8080} (a path prefix is kept). */
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
        Subscription subscription = new Subscription(base, new ArrayList<String>(channels), transport,
                cursor, listener, options);
        subscription.start();
        return subscription;
    }

    /** Publishes a JSON value given as JSON text (see {@link Json#write} to build one). */
    public PublishResult publish(String channel, String json) throws IOException {
        return post(channel, json, "application/json");
    }

    /** Publishes plain text; subscribers receive it as a JSON string. */
    public PublishResult publishText(String channel, String text) throws IOException {
        return post(channel, text, "text/plain; charset=utf-8");
    }

    private PublishResult post(String channel, String body, String contentType) throws IOException {
        byte[] bytes = body.getBytes(Http.UTF_8);
        URL url = new URL(base + "/pub/" + Http.pathSegment(channel));
        HttpURLConnection conn = Http.open(url, options.connectTimeoutMillis(), options.pollReadTimeoutMillis());
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
