package io.pushserver.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;

/**
 * A loopback TCP proxy that lets a test do to a client what mobile networks do: cut its
 * connections, or freeze them (sockets stay open, no byte gets through) until the client gives up.
 */
final class TcpProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final int targetPort;
    private final List<Pipe> pipes = new ArrayList<>();
    private int accepted;

    TcpProxy(int targetPort) throws IOException {
        this.targetPort = targetPort;
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

    /** How many connections the proxy has accepted so far. */
    synchronized int accepted() {
        return accepted;
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
                Pipe pipe = new Pipe(client, new Socket(InetAddress.getLoopbackAddress(), targetPort));
                pipe.start();
                synchronized (this) {
                    pipes.add(pipe);
                    accepted++;
                }
            } catch (IOException e) {
                Pipe.closeQuietly(client); // the server is down: the client sees the connection fail
            }
        }
    }

    @Override
    public void close() throws IOException {
        listener.close();
        cutAll();
    }

    private static final class Pipe {
        private final Socket client;
        private final Socket server;
        volatile boolean frozen;

        Pipe(Socket client, Socket server) {
            this.client = client;
            this.server = server;
        }

        void start() throws IOException {
            pump(client.getInputStream(), server.getOutputStream(), "proxy-up");
            pump(server.getInputStream(), client.getOutputStream(), "proxy-down");
        }

        private void pump(InputStream in, OutputStream out, String name) {
            Thread thread = new Thread(() -> {
                byte[] buf = new byte[16384];
                try {
                    for (int n; (n = in.read(buf)) != -1; ) {
                        if (!frozen) {
                            out.write(buf, 0, n);
                            out.flush();
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

        static void closeQuietly(Socket socket) {
            try {
                socket.close();
            } catch (IOException e) {
                // already closed
            }
        }
    }
}
