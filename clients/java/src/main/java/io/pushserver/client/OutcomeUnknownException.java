package io.pushserver.client;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A publish that may have been made although no answer said so (a {@code 504 outcome_unknown},
 * or a connection lost after the request went out) and that ran out of retries. Publishing the
 * same message again with {@link #idempotencyKeys()} is safe: the server answers the original ids.
 */
public class OutcomeUnknownException extends PushException {
    private static final long serialVersionUID = 1L;

    private final List<String> idempotencyKeys;
    private final int attempts;

    /** {@code last} is the last attempt's failure: its status when it was an answer, else -1. */
    public OutcomeUnknownException(List<String> idempotencyKeys, int attempts, IOException last) {
        super(last instanceof PushException ? ((PushException) last).status() : -1, "outcome_unknown",
                "publish outcome unknown after " + attempts + " attempts: " + last.getMessage(),
                last instanceof PushException ? ((PushException) last).retryAfterSeconds() : -1);
        this.idempotencyKeys = Collections.unmodifiableList(new ArrayList<String>(idempotencyKeys));
        this.attempts = attempts;
        initCause(last);
    }

    /** The keys the publish carried, one per message, in the order they were given. */
    public List<String> idempotencyKeys() {
        return idempotencyKeys;
    }

    /** How many times the publish was sent. */
    public int attempts() {
        return attempts;
    }
}
