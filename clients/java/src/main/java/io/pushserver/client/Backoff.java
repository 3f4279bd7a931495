package io.pushserver.client;

import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * Exponential reconnect delays with jitter, so that thousands of phones dropped by one server
 * restart do not all come back in the same instant (docs/protocol.md, "Reconnect backoff").
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

    /** Counts a failed attempt; the delay before the next one, uniform in {@link #bounds}. */
    long next() {
        failures++;
        long[] range = bounds(failures);
        return range[0] + (long) (random.nextDouble() * (range[1] - range[0] + 1));
    }

    /** Like {@link #next()}, but never shorter than a Retry-After (seconds; -1 when none). */
    long next(long retryAfterSeconds) {
        return Math.max(next(), TimeUnit.SECONDS.toMillis(retryAfterSeconds));
    }

    /** The range in ms, {cap/2, cap}, of the delay before retry {@code attempt} (1, 2, ...). */
    long[] bounds(int attempt) {
        long cap = Math.min(maxMillis, minMillis << Math.min(attempt - 1, 30));
        if (cap < 0) {
            cap = maxMillis;
        }
        return new long[] {cap / 2, cap};
    }

    /** Failed attempts in a row: the number of the retry the last {@link #next} was for. */
    int failures() {
        return failures;
    }

    /** A connection succeeded: the next failure starts from the minimum again. */
    void reset() {
        failures = 0;
    }
}
