package io.pushserver.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.ProtocolException;
import java.util.List;
import java.util.Map;

/** Turns each transport's response body into the protocol's events, typed. */
final class Framing {
    /** Where decoded events go, in order. */
    interface Sink {
        void message(Message message) throws IOException;

        void gap(Gap gap) throws IOException;

        /** A control event other than a gap ({@code reconnect}, {@code expired}, unknown ones). */
        void control(String type, Map<String, Object> event) throws IOException;

        /** A cursor that came outside any event (a long-poll body's {@code "cursor"}). */
        void cursor(String cursor);
    }

    private Framing() {}

    static void read(Transport transport, InputStream in, Sink sink) throws IOException {
        switch (transport) {
            case LONGPOLL:
                longPoll(in, sink);
                break;
            case STREAM:
                ndjson(new LineReader(in), sink);
                break;
            case SSE:
                sse(new LineReader(in), sink);
                break;
            default:
                throw new IllegalArgumentException("unknown transport " + transport);
        }
    }

    /** {@code {"messages": [...], "cursor": C}}. */
    private static void longPoll(InputStream in, Sink sink) throws IOException {
        Map<String, Object> body = Http.readObject(in);
        Object messages = body.get("messages");
        if (!(messages instanceof List)) {
            throw new ProtocolException("long-poll answer without a 'messages' list");
        }
        for (Object event : (List<?>) messages) {
            dispatch(asObject(event), sink);
        }
        sink.cursor(Fields.string(body, "cursor"));
    }

    /** One JSON object per line; blank lines are heartbeats or padding. */
    private static void ndjson(LineReader lines, Sink sink) throws IOException {
        for (String line; (line = lines.readLine()) != null; ) {
            if (!line.trim().isEmpty()) {
                dispatch(parse(line), sink);
            }
        }
    }

    /** Server-Sent Events: {@code data:} lines up to a blank line make one event; {@code :} is a comment. */
    private static void sse(LineReader lines, Sink sink) throws IOException {
        StringBuilder data = new StringBuilder();
        for (String line; (line = lines.readLine()) != null; ) {
            if (line.isEmpty()) {
                if (data.length() > 0) {
                    dispatch(parse(data.toString()), sink);
                    data.setLength(0);
                }
            } else if (line.startsWith("data:")) {
                if (data.length() > 0) {
                    data.append('\n');
                }
                data.append(line, line.startsWith("data: ") ? 6 : 5, line.length());
            }
            // "id:" repeats the cursor the event carries; comments and other fields are ignored
        }
    }

    /** Envelopes have no {@code "type"}; control events do. */
    private static void dispatch(Map<String, Object> event, Sink sink) throws IOException {
        Object type = event.get("type");
        if (type == null) {
            sink.message(Message.fromJson(event));
        } else if ("gap".equals(type)) {
            sink.gap(Gap.fromJson(event));
        } else {
            sink.control(String.valueOf(type), event);
        }
    }

    private static Map<String, Object> parse(String text) throws ProtocolException {
        try {
            return Json.parseObject(text);
        } catch (JsonException e) {
            throw new ProtocolException(e.getMessage());
        }
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asObject(Object event) throws ProtocolException {
        if (!(event instanceof Map)) {
            throw new ProtocolException("event is not a JSON object: " + Json.write(event));
        }
        return (Map<String, Object>) event;
    }
}
