package io.pushserver.client;

import java.util.Random;

/**
 * Exponential reconnect delays with jitter, so that thousands of phones dropped by one server
 * restart do not all come back in the same instant.
 */
final class Backoff {
    private final long minMillis;
    private final long maxMillis;
    private final Random random;
    private int failures;

    Backoff(long minMillis, long maxMillis, Random random) {
        this.minMillis = minMillis;
        this.maxMillis = maxMillis;
        this.random = random;
    }

    /** The delay before the next attempt: uniform in [cap/2, cap], cap doubling per failure. */
    long next() {
        long cap = Math.min(maxMillis, minMillis << Math.min(failures, 30));
        if (cap < 0) {
            cap = maxMillis;
        }
        failures++;
        long half = cap / 2;
        return half + (long) (random.nextDouble() * (cap - half + 1));
    }

    /** A connection succeeded: the next failure starts from the minimum again. */
    void reset() {
        failures = 0;
    }
}
