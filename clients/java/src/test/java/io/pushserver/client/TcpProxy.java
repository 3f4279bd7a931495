package io.pushserver.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntSupplier;

/**
 * A loopback TCP proxy that lets a test do to a client what mobile networks do: cut its
 * connections, or freeze them (sockets stay open, no byte gets through) until the client gives up,
 * or cut each one after a number of bytes from the server drawn for it. It keeps what clients
 * sent, for tests that check requests.
 */
final class TcpProxy implements AutoCloseable {
    private static final IntSupplier NEVER = () -> Integer.MAX_VALUE;

    private final ServerSocket listener;
    private final int targetPort;
    private final IntSupplier cutAfter;
    private final List<Pipe> pipes = new ArrayList<>();
    private final ByteArrayOutputStream sent = new ByteArrayOutputStream();
    private int accepted;
    private int cuts;

    TcpProxy(int targetPort) throws IOException {
        this(targetPort, NEVER);
    }

    /**
     * Cuts each connection once it has carried {@code cutAfter.getAsInt()} bytes from the server;
     * 0 cuts it when the server first answers, passing nothing on.
     */
    TcpProxy(int targetPort, IntSupplier cutAfter) throws IOException {
        this.targetPort = targetPort;
        this.cutAfter = cutAfter;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::acceptLoop, "proxy-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    URI url() {
        return URI.create("http://127.0.0.1:" + listener.getLocalPort());
    }

    /** Closes every connection open now; new ones go through. */
    synchronized void cutAll() {
        for (Pipe pipe : pipes) {
            pipe.close();
        }
        pipes.clear();
    }

    /** Stops forwarding on every connection open now, leaving them open; new ones go through. */
    synchronized void freezeAll() {
        for (Pipe pipe : pipes) {
            pipe.frozen = true;
        }
    }

    /** Every byte clients sent through the proxy so far (ISO-8859-1, so one char per byte). */
    String sent() {
        synchronized (sent) {
            return new String(sent.toByteArray(), StandardCharsets.ISO_8859_1);
        }
    }

    /** How many connections the proxy has accepted so far. */
    synchronized int accepted() {
        return accepted;
    }

    /** How many connections it has cut after their byte budget. */
    synchronized int cuts() {
        return cuts;
    }

    private synchronized void countCut() {
        cuts++;
    }

    private void acceptLoop() {
        while (true) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException closed) {
                return;
            }
            try {
                Pipe pipe = new Pipe(client, new Socket(InetAddress.getLoopbackAddress(), targetPort),
                        cutAfter.getAsInt());
                synchronized (this) { // listed before it forwards a byte: freezeAll and cutAll see it
                    pipes.add(pipe);
                    accepted++;
                }
                pipe.start();
            } catch (IOException e) {
                closeQuietly(client); // the server is down: the client sees the connection fail
            }
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
        cutAll();
    }

    private final class Pipe {
        private final Socket client;
        private final Socket server;
        private final int budget;
        volatile boolean frozen;

        Pipe(Socket client, Socket server, int budget) {
            this.client = client;
            this.server = server;
            this.budget = budget;
        }

        void start() throws IOException {
            pump(client.getInputStream(), server.getOutputStream(), "proxy-up", Integer.MAX_VALUE, sent);
            pump(server.getInputStream(), client.getOutputStream(), "proxy-down", budget, null);
        }

        /** Forwards until either side closes, or cuts once {@code left} bytes went through. */
        private void pump(InputStream in, OutputStream out, String name, int left,
                ByteArrayOutputStream tap) {
            Thread thread = new Thread(() -> {
                byte[] buf = new byte[16384];
                int remaining = left;
                try {
                    for (int n; (n = in.read(buf)) != -1; ) {
                        if (frozen) {
                            continue;
                        }
                        if (tap != null) {
                            synchronized (tap) {
                                tap.write(buf, 0, n);
                            }
                        }
                        out.write(buf, 0, Math.min(n, remaining));
                        out.flush();
                        remaining -= Math.min(n, remaining);
                        if (remaining == 0) {
                            countCut();
                            return;
                        }
                    }
                } catch (IOException e) {
                    // the other side or the test closed the connection
                } finally {
                    close();
                }
            }, name);
            thread.setDaemon(true);
            thread.start();
        }

        void close() {
            closeQuietly(client);
            closeQuietly(server);
        }
    }

    static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException e) {
            // already closed
        }
    }
}
