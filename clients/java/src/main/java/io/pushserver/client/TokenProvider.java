package io.pushserver.client;

/** Supplies the subscribe token (JWT); asked on every connection so an expired one can be renewed. */
public interface TokenProvider {
    /** The token to send, or null for none. Runs on the subscription's thread. */
    String token();
}
