package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every transport through a link that drops each connection after 300 to 3,000 bytes: 300
 * messages published at about 100/s must all arrive, once and in order, within 60 s.
 */
class CuttingLinkTest {
    private static final int COUNT = 300;
    private static final long PUBLISH_INTERVAL_MILLIS = 10;
    private static final long DEADLINE_MILLIS = 60000;
    private static final String CHANNEL = "cutting";

    /** Publishes n = 1..COUNT, one every PUBLISH_INTERVAL_MILLIS; completes after the last. */
    private static CompletableFuture<Void> publishPaced(PushClient publisher, String channel) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        ScheduledExecutorService clock = Executors.newSingleThreadScheduledExecutor();
        AtomicInteger next = new AtomicInteger(1);
        clock.scheduleAtFixedRate(() -> {
            try {
                int n = next.getAndIncrement();
                publisher.publish(channel, "{\"n\": " + n + "}");
                if (n == COUNT) {
                    done.complete(null);
                }
            } catch (Exception e) {
                done.completeExceptionally(e);
            }
        }, 0, PUBLISH_INTERVAL_MILLIS, TimeUnit.MILLISECONDS);
        done.whenComplete((ok, error) -> clock.shutdownNow());
        return done;
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void everyMessageArrivesOnceAndInOrder(Transport transport) throws Exception {
        List<String> channels = Collections.singletonList(CHANNEL);
        Recorder recorder = new Recorder();
        PushOptions options = new PushOptions().heartbeatSeconds(1).reconnectDelay(20, 2000).pollTimeoutSeconds(5);
        try (TestServer server = TestServer.start("--history-size", "1000", "--heartbeat", "1");
                TcpProxy proxy = new TcpProxy(server.port, () -> ThreadLocalRandom.current().nextInt(300, 3001))) {
            PushClient publisher = new PushClient(server.url);
            String cursor = publisher.poll(channels, null, 0, new Recorder());
            long elapsedMillis;
            try (Subscription s = new PushClient(proxy.url(), options)
                    .subscribe(channels, transport, cursor, recorder)) {
                long started = System.nanoTime();
                CompletableFuture<Void> publishing = publishPaced(publisher, CHANNEL);
                recorder.await(r -> r.messages.size() >= COUNT, COUNT + " messages", DEADLINE_MILLIS);
                elapsedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
                publishing.get(DEADLINE_MILLIS, TimeUnit.MILLISECONDS);
            }
            assertOneToCount(recorder);
            assertTrue(proxy.cuts() > 0, "the proxy cut connections");
            System.out.println("cutting link, " + transport + ": " + COUNT + " messages in " + elapsedMillis
                    + " ms, " + proxy.cuts() + " cuts");
        }
    }

    /** Messages n = 1..COUNT with ids 1..COUNT, and no gap: each once, in order. */
    private static void assertOneToCount(Recorder recorder) {
        List<Long> expected = new ArrayList<>();
        List<Long> ids = new ArrayList<>();
        List<Object> values = new ArrayList<>();
        for (Message m : recorder.messages()) {
            ids.add(m.id());
            values.add(((Map<?, ?>) m.data()).get("n"));
        }
        for (long n = 1; n <= COUNT; n++) {
            expected.add(n);
        }
        assertEquals(expected, ids);
        assertEquals(expected, values);
        assertTrue(recorder.gaps.isEmpty(), recorder.gaps.toString());
    }
}
