package io.pushserver.client;

/** Malformed JSON text, or a value that has no JSON form; the message names the position. */
public class JsonException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public JsonException(String message) {
        super(message);
    }
}
