package io.pushserver.client;

/**
 * The {@code limit} every long-poll of a subscription sends, adapted as docs/protocol.md ("How a
 * client sizes its polls") says, so a link that drops every few kilobytes still gets answers
 * through: halved after an answer broken off after its {@code 200} head, doubled after a whole
 * one, between 1 and the server's cap. A poll that failed before its head leaves it as it is.
 */
final class PollLimit {
    private final int cap;
    private int value;

    PollLimit(int cap) {
        this.cap = cap;
        this.value = cap;
    }

    /** What the next poll asks for. */
    int value() {
        return value;
    }

    /** An answer arrived whole, with {@code more} or not: ask for twice as much, up to the cap. */
    void answered() {
        value = (int) Math.min(cap, value * 2L);
    }

    /** An answer broke off after its head: ask for half, at least 1. */
    void cut() {
        value = Math.max(1, value / 2);
    }
}
