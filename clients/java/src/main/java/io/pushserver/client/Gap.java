package io.pushserver.client;

import java.net.ProtocolException;
import java.util.Map;

/**
 * Messages {@code from}..{@code to} of a channel that cannot be delivered. With reason
 * {@code "epoch"} the channel's history was lost, {@code from}/{@code to} are ids of the new epoch,
 * and {@code to < from} when none of them are missing.
 */
public final class Gap {
    private final String channel;
    private final long from;
    private final long to;
    private final String reason;
    private final String cursor;

    public Gap(String channel, long from, long to, String reason, String cursor) {
        this.channel = channel;
        this.from = from;
        this.to = to;
        this.reason = reason;
        this.cursor = cursor;
    }

    static Gap fromJson(Map<String, Object> event) throws ProtocolException {
        Object cursor = event.get("cursor");
        Object reason = event.get("reason");
        return new Gap(
                Fields.string(event, "channel"),
                Fields.number(event, "from").longValue(),
                Fields.number(event, "to").longValue(),
                reason instanceof String ? (String) reason : "expired",
                cursor instanceof String ? (String) cursor : null);
    }

    public String channel() {
        return channel;
    }

    public long from() {
        return from;
    }

    public long to() {
        return to;
    }

    /** {@code "expired"} (left the history) or {@code "epoch"} (history lost). */
    public String reason() {
        return reason;
    }

    /** The cursor after the gap, or null if the server sent none. */
    public String cursor() {
        return cursor;
    }

    @Override
    public String toString() {
        return "Gap{channel=" + channel + ", from=" + from + ", to=" + to + ", reason=" + reason + "}";
    }
}
