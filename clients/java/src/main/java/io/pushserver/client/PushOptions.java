package io.pushserver.client;

/** Settings for a {@link PushClient}; the client copies them, so later changes do not affect it. */
public final class PushOptions {
    private String publishKey;
    private TokenProvider tokenProvider;
    private double heartbeatSeconds = 20;
    private int pollTimeoutSeconds = 30;
    private int connectTimeoutMillis = 10000;
    private long reconnectMinMillis = 250;
    private long reconnectMaxMillis = 30000;
    private int history = -1;
    private int pollLimit = 100;
    private int publishRetries = 3;

    public PushOptions() {}

    PushOptions(PushOptions other) {
        publishKey = other.publishKey;
        tokenProvider = other.tokenProvider;
        heartbeatSeconds = other.heartbeatSeconds;
        pollTimeoutSeconds = other.pollTimeoutSeconds;
        connectTimeoutMillis = other.connectTimeoutMillis;
        reconnectMinMillis = other.reconnectMinMillis;
        reconnectMaxMillis = other.reconnectMaxMillis;
        history = other.history;
        pollLimit = other.pollLimit;
        publishRetries = other.publishRetries;
    }

    /** Sent as {@code Authorization: Bearer} on publishes (the server's {@code --publish-key}). */
    public PushOptions publishKey(String key) {
        publishKey = key;
        return this;
    }

    /** A fixed subscribe token (the server's {@code --subscribe-secret} mode). */
    public PushOptions token(final String token) {
        tokenProvider = new TokenProvider() {
            @Override
            public String token() {
                return token;
            }
        };
        return this;
    }

    /** A subscribe token asked for on every connection, so an expired one gets renewed. */
    public PushOptions tokenProvider(TokenProvider provider) {
        tokenProvider = provider;
        return this;
    }

    /**
     * The server's {@code --heartbeat} (default 20 s). A stream that sends nothing for 2.5 times
     * this long is taken for dead, closed and resumed.
     */
    public PushOptions heartbeatSeconds(double seconds) {
        if (!(seconds > 0)) {
            throw new IllegalArgumentException("heartbeat must be positive: " + seconds);
        }
        heartbeatSeconds = seconds;
        return this;
    }

    /** How long the server may hold a long-poll (default 30 s). */
    public PushOptions pollTimeoutSeconds(int seconds) {
        if (seconds < 0) {
            throw new IllegalArgumentException("poll timeout must not be negative: " + seconds);
        }
        pollTimeoutSeconds = seconds;
        return this;
    }

    public PushOptions connectTimeoutMillis(int millis) {
        connectTimeoutMillis = millis;
        return this;
    }

    /**
     * Reconnect delays: the first retry waits about {@code minMillis}, each further failure doubles
     * it up to {@code maxMillis}, each with random jitter (defaults 250 ms and 30 s). A retry after an
     * attempt that received the server's answer head (or a stream's) waits as a first retry again.
     */
    public PushOptions reconnectDelay(long minMillis, long maxMillis) {
        if (minMillis <= 0 || maxMillis < minMillis) {
            throw new IllegalArgumentException("need 0 < min <= max: " + minMillis + ", " + maxMillis);
        }
        reconnectMinMillis = minMillis;
        reconnectMaxMillis = maxMillis;
        return this;
    }

    /** Ask for up to {@code n} buffered messages of channels the cursor does not name ({@code ?history=}). */
    public PushOptions history(int n) {
        history = n;
        return this;
    }

    /**
     * The server's {@code --longpoll-max-messages} (default 100): the most a long-poll asks for.
     * After an answer breaks off in its body the subscription asks for half, down to 1, and after
     * each whole answer for twice as much again, up to this.
     */
    public PushOptions pollLimit(int cap) {
        if (cap < 1) {
            throw new IllegalArgumentException("poll limit must be at least 1: " + cap);
        }
        pollLimit = cap;
        return this;
    }

    /**
     * How often a publish is sent again after a network error, a 429 or a 5xx (default 3), waiting
     * as {@link #reconnectDelay} says and never less than a {@code Retry-After}. Every try carries
     * the same idempotency key, so none publishes twice.
     */
    public PushOptions publishRetries(int retries) {
        if (retries < 0) {
            throw new IllegalArgumentException("publish retries must not be negative: " + retries);
        }
        publishRetries = retries;
        return this;
    }

    String publishKey() {
        return publishKey;
    }

    String token() {
        return tokenProvider == null ? null : tokenProvider.token();
    }

    int streamReadTimeoutMillis() {
        return (int) Math.ceil(heartbeatSeconds * 2500);
    }

    int pollTimeoutSeconds() {
        return pollTimeoutSeconds;
    }

    int connectTimeoutMillis() {
        return connectTimeoutMillis;
    }

    long reconnectMinMillis() {
        return reconnectMinMillis;
    }

    long reconnectMaxMillis() {
        return reconnectMaxMillis;
    }

    int history() {
        return history;
    }

    int pollLimit() {
        return pollLimit;
    }

    int publishRetries() {
        return publishRetries;
    }
}
