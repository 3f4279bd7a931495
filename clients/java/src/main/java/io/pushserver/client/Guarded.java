package io.pushserver.client;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;

/**
 * A response body that fails as the drop as soon as its connection has been dropped on request
 * ({@link Subscription#reconnectNow}, {@link Subscription#close}): every read, and the close,
 * asks {@code dropped} before and after, so a socket error the drop caused is reported as the
 * drop. The JDK throws "Socket closed" from a blocked read and also from closing a body while
 * another thread closes its socket.
 */
final class Guarded extends FilterInputStream {
    /** Throws the drop's exception when the connection has been dropped on request. */
    interface Dropped {
        void check() throws IOException;
    }

    private final Dropped dropped;

    Guarded(InputStream in, Dropped dropped) {
        super(in);
        this.dropped = dropped;
    }

    @Override
    public int read() throws IOException {
        dropped.check();
        try {
            int b = super.read();
            dropped.check();
            return b;
        } catch (IOException e) {
            dropped.check();
            throw e;
        }
    }

    @Override
    public int read(byte[] buf, int off, int len) throws IOException {
        dropped.check();
        try {
            int n = super.read(buf, off, len);
            dropped.check();
            return n;
        } catch (IOException e) {
            dropped.check();
            throw e;
        }
    }

    @Override
    public void close() throws IOException {
        try {
            super.close();
        } catch (IOException e) {
            dropped.check();
            throw e;
        }
    }
}
