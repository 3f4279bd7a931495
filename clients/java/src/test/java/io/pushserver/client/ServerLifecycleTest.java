package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Collections;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** What a client sees when its server shuts down, comes back empty, or turns it away. */
class ServerLifecycleTest {
    @ParameterizedTest
    @EnumSource(Transport.class)
    void resumesAcrossARestartAndReportsTheLostEpoch(Transport transport) throws Exception {
        int port = TestServer.freePort();
        String ch = SubscribeTest.channel("restart-" + transport);
        Recorder recorder = new Recorder();
        TestServer first = TestServer.start(port, "--heartbeat", "1");
        PushClient client = new PushClient(first.url, SubscribeTest.options());
        try (Subscription s = SubscribeTest.subscribeLive(client, client, ch, transport, recorder)) {
            first.close();
            recorder.awaitState(ConnectionState.DISCONNECTED, 1);
            if (transport != Transport.LONGPOLL) {
                synchronized (recorder) {
                    assertEquals("server asked to reconnect", recorder.causes.get(recorder.states.indexOf(
                            ConnectionState.DISCONNECTED)).getMessage());
                }
            }
            try (TestServer second = TestServer.start(port, "--heartbeat", "1")) {
                recorder.await(r -> r.gaps.size() == 1, "the epoch gap");
                client.publish(ch, "{\"n\": 0}");
                recorder.awaitMessages(2);
                synchronized (recorder) {
                    assertEquals(Arrays.asList("m:" + ch + ":1", "gap:" + ch + ":1-0:epoch", "m:" + ch + ":1"),
                            recorder.events);
                }
                assertEquals(recorder.messages().get(1).cursor(), s.cursor());
            }
        }
    }

    @Test
    void waitsForRetryAfterWhenTheServerIsFull() throws Exception {
        try (TestServer server = TestServer.start("--max-connections", "1", "--heartbeat", "1")) {
            PushClient client = new PushClient(server.url, SubscribeTest.options());
            String ch = SubscribeTest.channel("full");
            Recorder holder = new Recorder();
            Subscription first = SubscribeTest.subscribeLive(client, client, ch, Transport.STREAM, holder);

            Recorder waiting = new Recorder();
            try (Subscription second = client.subscribe(Collections.singletonList(ch), Transport.STREAM, null,
                    waiting)) {
                waiting.awaitState(ConnectionState.CONNECTING, 2);
                PushException full;
                long retryGapNanos;
                synchronized (waiting) {
                    int refused = waiting.states.indexOf(ConnectionState.DISCONNECTED);
                    full = assertInstanceOf(PushException.class, waiting.causes.get(refused));
                    retryGapNanos = waiting.stateTimes.get(refused + 1) - waiting.stateTimes.get(refused);
                }
                assertEquals(503, full.status());
                assertEquals("over_capacity", full.code());
                assertEquals(1, full.retryAfterSeconds());
                assertTrue(retryGapNanos >= TimeUnit.SECONDS.toNanos(1),
                        "retried after " + retryGapNanos / 1e6 + " ms, before Retry-After");

                first.close();
                assertTrue(first.awaitTermination(10, TimeUnit.SECONDS));
                waiting.awaitState(ConnectionState.CONNECTED, 1);
                client.publish(ch, "{\"n\": 0}");
                waiting.awaitMessages(2); // the probe (history=1), then this one
                assertEquals(0L, SubscribeTest.n(waiting.messages().get(1)));
            }
        }
    }
}
