package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class PollLimitTest {
    private static final Pattern LIMIT = Pattern.compile("[?&]limit=(\\d+)");
    private static final byte[] WHOLE = "{\"messages\": [], \"cursor\": \"c1\"}".getBytes(StandardCharsets.UTF_8);

    /** The limit asked for before each step and after the last: "cut" or "whole". */
    private static List<Integer> play(int cap, String... steps) {
        PollLimit limit = new PollLimit(cap);
        List<Integer> asked = new ArrayList<>();
        for (String step : steps) {
            asked.add(limit.value());
            if (step.equals("cut")) {
                limit.cut();
            } else {
                limit.answered();
            }
        }
        asked.add(limit.value());
        return asked;
    }

    @Test
    void halvesAfterEachCutAnswerDownToOneAndDoublesBackToTheCap() {
        String[] steps = new String[16];
        Arrays.fill(steps, 0, 8, "cut");
        Arrays.fill(steps, 8, 16, "whole");
        assertEquals(Arrays.asList(100, 50, 25, 12, 6, 3, 1, 1, 1, 2, 4, 8, 16, 32, 64, 100, 100),
                play(100, steps));
    }

    @Test
    void startsAtTheCapAndNeverPassesIt() {
        assertEquals(Arrays.asList(10, 10, 5, 2, 4), play(10, "whole", "cut", "cut", "whole"));
    }

    /**
     * A subscription against a server that plays {@code script} (then holds every poll): each
     * poll's outcome is "cut" (a 200 head, then the body breaks off), "refused" (a 503) or
     * "whole". Returns the {@code limit} of every poll sent.
     */
    private static List<Integer> subscribeThrough(PushOptions options, String... script) throws Exception {
        List<Integer> limits = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch enough = new CountDownLatch(script.length + 1);
        CountDownLatch release = new CountDownLatch(1);
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        ExecutorService threads = Executors.newCachedThreadPool();
        server.setExecutor(threads);
        server.createContext("/lp/", exchange -> {
            Matcher m = LIMIT.matcher(exchange.getRequestURI().getRawQuery());
            int index;
            synchronized (limits) {
                limits.add(m.find() ? Integer.valueOf(m.group(1)) : null);
                index = limits.size() - 1;
            }
            enough.countDown();
            if (index < script.length) {
                answer(exchange, script[index]);
            } else {
                awaitQuietly(release);
                exchange.close();
            }
        });
        server.start();
        URI base = URI.create("http://127.0.0.1:" + server.getAddress().getPort());
        try (Subscription s = new PushClient(base, options)
                .subscribe(Collections.singletonList("a"), Transport.LONGPOLL, "c0", new Recorder())) {
            enough.await();
            // Taken while the last poll is held: released, it is closed without an answer, and the
            // JDK resends a GET whose connection closes before the answer head (unless close()'s
            // disconnect got there first), so it may reach the server once more.
            return new ArrayList<>(limits);
        } finally {
            release.countDown();
            server.stop(0);
            threads.shutdownNow();
        }
    }

    private static void answer(HttpExchange exchange, String outcome) throws IOException {
        if (outcome.equals("refused")) {
            exchange.sendResponseHeaders(503, -1);
        } else {
            exchange.sendResponseHeaders(200, WHOLE.length);
            OutputStream body = exchange.getResponseBody();
            body.write(WHOLE, 0, outcome.equals("cut") ? WHOLE.length / 2 : WHOLE.length);
            body.flush();
        }
        exchange.close();
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void aSubscriptionSendsItsLimitAndAdaptsItToHowEachPollWent() throws Exception {
        PushOptions options = new PushOptions().reconnectDelay(5, 50).pollTimeoutSeconds(5).pollLimit(40);
        List<Integer> limits = subscribeThrough(options, "cut", "cut", "refused", "whole", "cut", "whole", "whole");
        assertEquals(Arrays.asList(40, 20, 10, 10, 20, 10, 20, 40), limits);
    }
}
