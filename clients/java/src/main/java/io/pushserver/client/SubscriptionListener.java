package io.pushserver.client;

/**
 * Receives a subscription's events, all on the subscription's own thread and in order. Do not
 * block it for long: the connection is not read while a callback runs.
 */
public interface SubscriptionListener {
    /** A message; {@link Message#cursor()} is the point to resume from once it is handled. */
    void onMessage(Message message);

    /** Messages that can no longer be delivered; loss is always reported, never silent. */
    void onGap(Gap gap);

    /**
     * The connection's state changed. {@code cause} is the failure behind {@code DISCONNECTED}, or
     * the final error behind {@code CLOSED} (a {@link PushException}, null after {@code close()}).
     */
    default void onStateChange(ConnectionState state, Throwable cause) {}
}
