package io.pushserver.client;

import java.net.ProtocolException;
import java.util.Map;

/** The server's answer to a publish. */
public final class PublishResult {
    private final String channel;
    private final long id;
    private final double ts;
    private final long subscribers;

    public PublishResult(String channel, long id, double ts, long subscribers) {
        this.channel = channel;
        this.id = id;
        this.ts = ts;
        this.subscribers = subscribers;
    }

    static PublishResult fromJson(Map<String, Object> answer) throws ProtocolException {
        return new PublishResult(
                Fields.string(answer, "channel"),
                Fields.number(answer, "id").longValue(),
                Fields.number(answer, "ts").doubleValue(),
                Fields.number(answer, "subscribers").longValue());
    }

    public String channel() {
        return channel;
    }

    /** The id the message got in its channel. */
    public long id() {
        return id;
    }

    /** The server's publish time, epoch seconds. */
    public double ts() {
        return ts;
    }

    /** How many subscribers the message was handed to on that server. */
    public long subscribers() {
        return subscribers;
    }

    @Override
    public String toString() {
        return "PublishResult{channel=" + channel + ", id=" + id + ", subscribers=" + subscribers + "}";
    }
}
