package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Serves a compressed transcript to a real {@link Subscription} over a loopback socket, one read
 * per HTTP chunk, each read only once the subscription has delivered what the reads before it
 * completed: a decoder that held a message back for later bytes never gets them, and the wait
 * fails at its deadline.
 */
final class Lockstep {
    private static final Map<String, Transport> TRANSPORTS = new java.util.HashMap<>();
    private static final Map<String, String> TYPES = new java.util.HashMap<>();

    static {
        TRANSPORTS.put("sse", Transport.SSE);
        TRANSPORTS.put("ndjson", Transport.STREAM);
        TRANSPORTS.put("longpoll", Transport.LONGPOLL);
        TYPES.put("sse", "text/event-stream");
        TYPES.put("ndjson", "application/x-ndjson");
        TYPES.put("longpoll", "application/json");
    }

    private Lockstep() {}

    static void replay(Map<String, Object> c) throws Exception {
        String kind = (String) c.get("kind");
        Recorder recorder = new Recorder();
        try (ServerSocket server = new ServerSocket(0, 8, InetAddress.getLoopbackAddress())) {
            CompletableFuture<String> served = new CompletableFuture<>();
            Thread thread = new Thread(() -> {
                try {
                    served.complete(serve(server, c, recorder));
                } catch (Throwable e) {
                    served.completeExceptionally(e);
                }
            }, "lockstep");
            thread.setDaemon(true);
            thread.start();
            URI url = URI.create("http://127.0.0.1:" + server.getLocalPort());
            PushOptions options = new PushOptions().reconnectDelay(60000, 60000).pollTimeoutSeconds(5);
            try (Subscription sub = new PushClient(url, options).subscribe(
                    Collections.singletonList("prices.AAPL"), TRANSPORTS.get(kind), "prices.AAPL:70f05dee1:0", recorder)) {
                String request = served.get(60, TimeUnit.SECONDS);
                assertTrue(request.toLowerCase(Locale.ROOT).contains("accept-encoding: gzip"), request);
                List<Object> expected = new ArrayList<>();
                for (Object event : (List<?>) c.get("expect")) {
                    Map<?, ?> e = (Map<?, ?>) event;
                    if (e.containsKey("message")) {
                        expected.add(e);
                    } else if (e.containsKey("checkpoint")) {
                        recorder.await(r -> e.get("checkpoint").equals(sub.cursor()), "the answer's cursor");
                    }
                }
                recorder.awaitMessages(expected.size());
                List<Object> got = new ArrayList<>();
                for (Message m : recorder.messages()) {
                    got.add(ConformanceTest.notation(m));
                }
                assertEquals(expected, got);
                if ("cut".equals(c.get("end"))) {
                    recorder.awaitState(ConnectionState.DISCONNECTED, 1);
                }
            }
        }
    }

    /** Answers the first request with the case's reads; the request head, for checking. */
    private static String serve(ServerSocket server, Map<String, Object> c, Recorder recorder)
            throws IOException, InterruptedException {
        Socket socket = server.accept();
        String request = head(socket.getInputStream());
        OutputStream out = socket.getOutputStream();
        byte[] body = Base64.getDecoder().decode((String) c.get("body_base64"));
        String head = "HTTP/1.1 200 OK\r\nContent-Type: " + TYPES.get(c.get("kind"))
                + "\r\nContent-Encoding: " + c.get("content_encoding") + "\r\n";
        if ("longpoll".equals(c.get("kind"))) { // a long-poll answer has its length, as the server's
            out.write((head + "Content-Length: " + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(body);
            out.flush();
            socket.close();
            return request;
        }
        out.write((head + "Transfer-Encoding: chunked\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        List<Integer> edges = new ArrayList<>();
        edges.add(0);
        Object splits = c.get("splits");
        if (splits != null) {
            for (Object split : (List<?>) splits) {
                edges.add(((Long) split).intValue());
            }
        }
        edges.add(body.length);
        List<?> delivered = (List<?>) c.get("delivered");
        for (int i = 1; i < edges.size(); i++) {
            int start = edges.get(i - 1);
            int end = edges.get(i);
            out.write((Integer.toHexString(end - start) + "\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(body, start, end - start);
            out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            final int count = delivered == null ? 0 : ((Long) delivered.get(i - 1)).intValue();
            recorder.awaitMessages(count);
        }
        if ("cut".equals(c.get("end"))) {
            socket.setSoLinger(true, 0);
        } else {
            try {
                out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
            } catch (IOException gone) {
                // the client may close once the gzip trailer has ended its body
            }
        }
        socket.close();
        return request;
    }

    private static String head(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        while (!head.toString("ISO-8859-1").endsWith("\r\n\r\n")) {
            int b = in.read();
            if (b < 0) {
                throw new IOException("the request ended inside its head");
            }
            head.write(b);
        }
        return head.toString("ISO-8859-1");
    }
}
