package io.pushserver.client;

/** Where a subscription's connection stands, reported through {@link SubscriptionListener#onStateChange}. */
public enum ConnectionState {
    /** A request is being made (first connect, or a reconnect after a drop). */
    CONNECTING,
    /** The server accepted the subscription; events flow. */
    CONNECTED,
    /** The connection dropped or an attempt failed; a reconnect is scheduled. */
    DISCONNECTED,
    /** Final: closed by the app, or stopped by an error that retrying cannot fix. */
    CLOSED
}
