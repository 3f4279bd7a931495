package io.pushserver.client;

import java.io.IOException;

/** An error answer from the server: {@code {"error": code, "message": ...}} with its HTTP status. */
public class PushException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String code;
    private final String serverMessage;
    private final long retryAfterSeconds;

    public PushException(int status, String code, String serverMessage, long retryAfterSeconds) {
        super(status + " " + code + ": " + serverMessage);
        this.status = status;
        this.code = code;
        this.serverMessage = serverMessage;
        this.retryAfterSeconds = retryAfterSeconds;
    }

    /** The HTTP status, e.g. 400, 401, 503. */
    public int status() {
        return status;
    }

    /** The protocol's error code, e.g. {@code bad_channel}, {@code unauthorized}, {@code draining}. */
    public String code() {
        return code;
    }

    /** The server's human-readable message. */
    public String serverMessage() {
        return serverMessage;
    }

    /** The {@code Retry-After} the server asked for, in seconds, or -1 when it gave none. */
    public long retryAfterSeconds() {
        return retryAfterSeconds;
    }

    /** Whether trying again later can succeed: 5xx, 429 and 408 can, other 4xx are final. */
    public boolean isRetryable() {
        return status >= 500 || status == 429 || status == 408;
    }
}
