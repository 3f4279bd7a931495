package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.SocketException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * A body dropped on request fails as the drop, whichever call meets the closed socket: the
 * Java suite once saw a requested reconnect reported as "Socket closed", thrown by closing the
 * body of a stream while the dropping thread closed its socket.
 */
class GuardedTest {
    private final AtomicBoolean dropped = new AtomicBoolean();
    private final SocketException closed = new SocketException("Socket closed");

    private final Guarded.Dropped check = () -> {
        if (dropped.get()) {
            throw new InterruptedIOException("reconnect requested");
        }
    };

    /** A body of "abc" whose socket has been closed under it: every call fails. */
    private final InputStream cut = new ByteArrayInputStream("abc".getBytes()) {
        @Override
        public synchronized int read() {
            throw new IllegalStateException("read after the check said dropped");
        }

        @Override
        public void close() throws IOException {
            throw closed;
        }
    };

    @Test
    void aCloseThatFailsAfterADropFailsAsTheDrop() {
        dropped.set(true);
        IOException e = assertThrows(IOException.class, () -> new Guarded(cut, check).close());
        assertEquals("reconnect requested", e.getMessage());
    }

    @Test
    void aCloseThatFailsWithoutADropKeepsItsOwnError() {
        IOException e = assertThrows(IOException.class, () -> new Guarded(cut, check).close());
        assertSame(closed, e);
    }

    @Test
    void aReadAfterADropFailsAsTheDropWithoutReading() {
        dropped.set(true);
        IOException e = assertThrows(IOException.class, () -> new Guarded(cut, check).read());
        assertEquals("reconnect requested", e.getMessage());
    }

    @Test
    void readsGoThroughWhileNotDropped() throws IOException {
        try (Guarded body = new Guarded(new ByteArrayInputStream("abc".getBytes()), check)) {
            byte[] buf = new byte[8];
            assertEquals(3, body.read(buf, 0, buf.length));
            assertEquals(-1, body.read());
        }
    }
}
