package io.pushserver.client;

/** How a subscription holds its connection; each maps to one subscribe path of the protocol. */
public enum Transport {
    /** {@code GET /lp/...}: one request per batch; works through any proxy. */
    LONGPOLL("lp"),
    /** {@code GET /stream/...}: one chunked response, one JSON object per line. */
    STREAM("stream"),
    /** {@code GET /sse/...}: Server-Sent Events. */
    SSE("sse");

    private final String path;

    Transport(String path) {
        this.path = path;
    }

    /** The first path segment of the subscribe request. */
    public String path() {
        return path;
    }
}
