package io.pushserver.client;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.HttpURLConnection;
import java.net.ProtocolException;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One subscription and the thread that holds its connection: it reconnects with backoff after any
 * drop and resumes from the last cursor, so the listener sees every message once, in order, or a
 * {@link Gap}.
 */
public final class Subscription implements Closeable {
    private final PushClient client;
    private final List<String> channels;
    private final Transport transport;
    private final SubscriptionListener listener;
    private final PushOptions options;
    private final Backoff backoff;
    private final PollLimit limit;
    private final Thread thread;
    private final Object wake = new Object();
    private final Object dispatch = new Object();
    /** Bumped by close() and reconnectNow(): a connection opened before must end. */
    private final AtomicInteger drops = new AtomicInteger();

    private volatile String cursor;
    private volatile boolean closed;
    private volatile ConnectionState state; // null until the first attempt is reported
    private volatile HttpURLConnection current;
    private boolean wakeRequested; // guarded by wake

    Subscription(PushClient client, List<String> channels, Transport transport, String cursor,
            SubscriptionListener listener, PushOptions options) {
        this.client = client;
        this.channels = Collections.unmodifiableList(channels);
        this.transport = transport;
        this.cursor = cursor;
        this.listener = listener;
        this.options = options;
        this.backoff = new Backoff(options.reconnectMinMillis(), options.reconnectMaxMillis(), new Random());
        this.limit = new PollLimit(options.pollLimit());
        this.thread = new Thread(new Runnable() {
            @Override
            public void run() {
                runLoop();
            }
        }, "pushclient-" + transport.path() + "-" + join(channels));
        thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    /**
     * The cursor after the last event handed to the listener (or the one subscribed with).
     * Persist it to resume after process death: pass it to {@link PushClient#subscribe} again.
     */
    public String cursor() {
        return cursor;
    }

    public List<String> channels() {
        return channels;
    }

    public Transport transport() {
        return transport;
    }

    public ConnectionState state() {
        ConnectionState now = state;
        return now == null ? ConnectionState.CONNECTING : now;
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Drops the current connection and reconnects at once, skipping any backoff wait: call it when
     * the network changes (the old socket may be bound to a network that is gone).
     */
    public void reconnectNow() {
        synchronized (wake) {
            wakeRequested = true;
            wake.notifyAll();
        }
        dropConnection();
    }

    /**
     * Stops the subscription. No message or gap is delivered after this returns (it waits for a
     * callback in progress on another thread); the listener's last callback is
     * {@code onStateChange(CLOSED, null)}, from the subscription's thread.
     */
    @Override
    public void close() {
        synchronized (dispatch) {
            closed = true;
        }
        synchronized (wake) {
            wake.notifyAll();
        }
        dropConnection();
    }

    /** Waits until the subscription's thread has finished (after {@link #close} or a final error). */
    public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
        thread.join(Math.max(1, unit.toMillis(timeout)));
        return !thread.isAlive();
    }

    private void runLoop() {
        PushException finalError = null;
        try {
            while (!closed) {
                long delay;
                try {
                    connect();
                    delay = backoff.next();
                    setState(ConnectionState.DISCONNECTED, new EOFException("server closed the connection"));
                } catch (ServerReconnect reconnect) {
                    delay = reconnect.immediate ? 0 : backoff.next();
                    setState(ConnectionState.DISCONNECTED, reconnect);
                } catch (PushException e) {
                    if (!e.isRetryable()) {
                        finalError = e;
                        break;
                    }
                    delay = backoff.next(e.retryAfterSeconds());
                    setState(ConnectionState.DISCONNECTED, e);
                } catch (IOException e) {
                    delay = backoff.next();
                    setState(ConnectionState.DISCONNECTED, e);
                } finally {
                    current = null;
                }
                pause(delay);
            }
        } finally {
            closed = true;
            state = ConnectionState.CLOSED;
            listener.onStateChange(ConnectionState.CLOSED, finalError);
        }
    }

    /**
     * One connection: a stream until it ends, or long-polls one after another until one fails.
     * Each long-poll sends the subscription's {@link PollLimit} and adapts it to how it went.
     *
     * <p>Without a cursor it first takes the head cursor (and any {@code history} messages) from
     * an immediate long-poll: a stream carries no cursor until its first message and a first
     * long-poll is held until one comes, so a drop before then would leave nothing to resume from.
     */
    private void connect() throws IOException {
        if (state != ConnectionState.CONNECTED) {
            setState(ConnectionState.CONNECTING, null);
        }
        int generation = drops.get();
        boolean head;
        do {
            head = cursor == null;
            Transport using = head ? Transport.LONGPOLL : transport;
            boolean polling = using == Transport.LONGPOLL;
            int pollTimeout = head ? 0 : options.pollTimeoutSeconds();
            HttpURLConnection conn = Http.open(
                    client.subscribeUrl(using, channels, cursor, pollTimeout, limit.value()),
                    options.connectTimeoutMillis(),
                    polling ? Http.pollReadTimeoutMillis(pollTimeout) : options.streamReadTimeoutMillis());
            Http.acceptGzip(conn);
            current = conn;
            boolean reusable = false;
            try {
                InputStream in = new Guarded(open(conn, generation, head), new Guarded.Dropped() {
                    @Override
                    public void check() throws IOException {
                        checkNotDropped(generation);
                    }
                });
                try {
                    Framing.read(using, in, sink);
                } catch (IOException e) {
                    if (polling && !(e instanceof ServerReconnect) && !dropped(generation)) {
                        limit.cut(); // the head came, the body broke off
                    }
                    throw e;
                } finally {
                    in.close();
                }
                if (polling) {
                    limit.answered();
                }
                reusable = polling;
            } finally {
                if (!reusable || closed) {
                    conn.disconnect(); // a long-poll answered in full keeps its connection alive
                }
            }
            if (head && cursor == null && !closed) {
                throw new ProtocolException("long-poll answer without a cursor");
            }
        } while ((head || transport == Transport.LONGPOLL) && !closed);
    }

    /**
     * Sends the request and checks the answer; a drop racing with it can make the JDK throw unchecked.
     * A {@code 200} head is progress, so the retry after whatever follows is a first retry again.
     * The subscription is connected once its own transport answers, not the head long-poll.
     */
    private InputStream open(HttpURLConnection conn, int generation, boolean head) throws IOException {
        try {
            int status = Http.status(conn);
            if (status != HttpURLConnection.HTTP_OK) {
                throw Http.error(conn, status);
            }
            backoff.reset();
            if (!head) {
                setState(ConnectionState.CONNECTED, null);
            }
            return Http.body(conn);
        } catch (IOException e) {
            checkNotDropped(generation);
            throw e;
        } catch (RuntimeException e) {
            checkNotDropped(generation);
            throw new IOException("request failed", e);
        }
    }

    /** A connection dropped on request fails as that, not as the socket error the drop caused. */
    private void checkNotDropped(int generation) throws InterruptedIOException {
        if (dropped(generation)) {
            throw new InterruptedIOException(closed ? "subscription closed" : "reconnect requested");
        }
    }

    /** Whether close() or reconnectNow() ended the connection opened at {@code generation}. */
    private boolean dropped(int generation) {
        return closed || drops.get() != generation;
    }

    /**
     * Ends the current connection from another thread without blocking the caller. The JDK's
     * disconnect() waits for a blocked read to return, so the reading side also checks
     * {@link #drops} around every read and the close ({@link Guarded}); Android's returns at once.
     */
    private void dropConnection() {
        drops.incrementAndGet();
        final HttpURLConnection conn = current;
        if (conn == null) {
            return;
        }
        Thread disconnecting = new Thread(new Runnable() {
            @Override
            public void run() {
                conn.disconnect();
            }
        }, thread.getName() + "-disconnect");
        disconnecting.setDaemon(true);
        disconnecting.start();
    }

    private final Framing.Sink sink = new Framing.Sink() {
        @Override
        public void message(Message message) {
            deliver(message, null);
        }

        @Override
        public void gap(Gap gap) {
            deliver(null, gap);
        }

        @Override
        public void control(String type, Map<String, Object> event) throws IOException {
            if ("reconnect".equals(type)) {
                cursor(event.get("cursor") instanceof String ? (String) event.get("cursor") : null);
                throw new ServerReconnect("server asked to reconnect", false);
            }
            if ("expired".equals(type)) {
                throw new ServerReconnect("subscribe token expired", true);
            }
            // control types this client does not know are ignored, as the protocol asks
        }

        @Override
        public void cursor(String next) {
            synchronized (dispatch) {
                if (next != null && !closed) {
                    cursor = next;
                }
            }
        }
    };

    /** Moves the cursor past an event and hands it over, unless closed: then neither happens. */
    private void deliver(Message message, Gap gap) {
        synchronized (dispatch) {
            if (closed) {
                return;
            }
            if (message != null) {
                cursor = message.cursor();
                listener.onMessage(message);
            } else {
                if (gap.cursor() != null) {
                    cursor = gap.cursor();
                }
                listener.onGap(gap);
            }
        }
    }

    private void setState(ConnectionState next, Throwable cause) {
        if (closed || (next == state && cause == null)) {
            return;
        }
        state = next;
        listener.onStateChange(next, cause);
    }

    /** Waits out a reconnect delay; {@link #reconnectNow} and {@link #close} cut it short. */
    private void pause(long millis) {
        synchronized (wake) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
            while (!closed && !wakeRequested) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                try {
                    wake.wait(TimeUnit.NANOSECONDS.toMillis(left) + 1);
                } catch (InterruptedException e) {
                    closed = true;
                }
            }
            if (wakeRequested) {
                backoff.reset();
                wakeRequested = false;
            }
        }
    }

    private static String join(List<String> parts) {
        StringBuilder out = new StringBuilder();
        for (String part : parts) {
            out.append(out.length() == 0 ? "" : ",").append(part);
        }
        return out.toString();
    }

    /** The server sent {@code reconnect} or {@code expired}: end this connection and make another. */
    private static final class ServerReconnect extends IOException {
        private static final long serialVersionUID = 1L;
        final boolean immediate;

        ServerReconnect(String message, boolean immediate) {
            super(message);
            this.immediate = immediate;
        }
    }
}
