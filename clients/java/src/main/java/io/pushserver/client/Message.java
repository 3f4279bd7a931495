package io.pushserver.client;

import java.net.ProtocolException;
import java.util.Map;

/** One delivered message (the protocol's envelope). */
public final class Message {
    private final String channel;
    private final long id;
    private final double ts;
    private final Object data;
    private final String cursor;

    public Message(String channel, long id, double ts, Object data, String cursor) {
        this.channel = channel;
        this.id = id;
        this.ts = ts;
        this.data = data;
        this.cursor = cursor;
    }

    static Message fromJson(Map<String, Object> envelope) throws ProtocolException {
        return new Message(
                Fields.string(envelope, "channel"),
                Fields.number(envelope, "id").longValue(),
                Fields.number(envelope, "ts").doubleValue(),
                envelope.get("data"),
                Fields.string(envelope, "cursor"));
    }

    public String channel() {
        return channel;
    }

    /** The channel's sequence number: 1, 2, 3 ... per channel. */
    public long id() {
        return id;
    }

    /** The server's publish time, epoch seconds. */
    public double ts() {
        return ts;
    }

    /** The published value as parsed by {@link Json}; a String when a text body was published. */
    public Object data() {
        return data;
    }

    /** The published value as JSON text, for apps that parse with their own JSON library. */
    public String dataJson() {
        return Json.write(data);
    }

    /** The subscription's cursor after this message: persist it to resume from here later. */
    public String cursor() {
        return cursor;
    }

    @Override
    public String toString() {
        return "Message{channel=" + channel + ", id=" + id + ", data=" + dataJson() + "}";
    }
}
