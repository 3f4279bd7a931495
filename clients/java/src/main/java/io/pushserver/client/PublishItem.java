package io.pushserver.client;

/** One message of a {@link PushClient#publishBatch batch}: a channel and a JSON value as text. */
public final class PublishItem {
    private final String channel;
    private final String json;
    private final String idempotencyKey;

    /** An item whose idempotency key the client generates. */
    public PublishItem(String channel, String json) {
        this(channel, json, null);
    }

    /**
     * {@code json} must be one JSON value (checked here: it is sent inside the batch as it is);
     * {@code idempotencyKey} may be null for a new random one.
     *
     * @throws JsonException when {@code json} is not valid JSON
     */
    public PublishItem(String channel, String json, String idempotencyKey) {
        if (channel == null) {
            throw new NullPointerException("channel");
        }
        Json.parse(json);
        this.channel = channel;
        this.json = json;
        this.idempotencyKey = idempotencyKey;
    }

    public String channel() {
        return channel;
    }

    /** The message as JSON text. */
    public String json() {
        return json;
    }

    /** The key given for this item, or null when the client makes one. */
    public String idempotencyKey() {
        return idempotencyKey;
    }
}
