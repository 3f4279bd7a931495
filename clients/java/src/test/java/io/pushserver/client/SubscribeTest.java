package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.HttpURLConnection;
import java.net.SocketTimeoutException;
import java.net.URL;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class SubscribeTest {
    private static final AtomicInteger CHANNELS = new AtomicInteger();
    private static TestServer server;
    private static PushClient publisher;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start("--history-size", "5000", "--heartbeat", "1");
        publisher = new PushClient(server.url);
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    /** The server's heartbeat, quick reconnects, and history=1 for the probe of subscribeLive. */
    static PushOptions options() {
        return new PushOptions().heartbeatSeconds(1).reconnectDelay(20, 200).pollTimeoutSeconds(5).history(1);
    }

    static String channel(String name) {
        return name + "-" + CHANNELS.incrementAndGet();
    }

    /**
     * Publishes a probe ({@code n = -1}), subscribes asking for the last buffered message and
     * waits for the probe and for the transport to be connected: from then on the cursor covers
     * everything published and the subscription holds its connection.
     */
    static Subscription subscribeLive(PushClient client, PushClient publishWith, String channel,
            Transport transport, Recorder recorder) throws Exception {
        publishWith.publish(channel, "{\"n\": -1}");
        Subscription s = client.subscribe(Collections.singletonList(channel), transport, null, recorder);
        recorder.awaitMessages(1);
        recorder.awaitState(ConnectionState.CONNECTED, 1);
        assertEquals(-1L, n(recorder.messages().get(0)));
        return s;
    }

    private static Subscription subscribeLive(String channel, Transport transport, Recorder recorder)
            throws Exception {
        return subscribeLive(new PushClient(server.url, options()), publisher, channel, transport, recorder);
    }

    static void publishRange(String channel, int from, int to) throws Exception {
        for (int i = from; i < to; i++) {
            publisher.publish(channel, "{\"n\": " + i + "}");
        }
    }

    static long n(Message message) {
        return (Long) ((Map<?, ?>) message.data()).get("n");
    }

    /** The messages carry n = from, from+1, ... to-1 and consecutive ids: none lost, none twice, in order. */
    static void assertSequence(List<Message> messages, int from, int to) {
        List<Long> expected = new ArrayList<>();
        List<Long> got = new ArrayList<>();
        for (int i = from; i < to; i++) {
            expected.add((long) i);
        }
        for (Message m : messages) {
            got.add(n(m));
        }
        assertEquals(expected, got);
        for (int i = 1; i < messages.size(); i++) {
            assertEquals(messages.get(i - 1).id() + 1, messages.get(i).id(), "ids must be consecutive");
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void receivesAThousandMessagesInOrder(Transport transport) throws Exception {
        String ch = channel("thousand-" + transport);
        Recorder recorder = new Recorder();
        try (Subscription s = subscribeLive(ch, transport, recorder)) {
            publishRange(ch, 0, 1000);
            recorder.awaitMessages(1001);
            List<Message> got = recorder.messages();
            assertSequence(got.subList(1, got.size()), 0, 1000);
            assertEquals(ch, got.get(1000).channel());
            assertTrue(got.get(1000).ts() > 1.6e9, "ts is epoch seconds");
            assertEquals(got.get(1000).cursor(), s.cursor());
            assertTrue(recorder.gaps.isEmpty(), recorder.gaps.toString());
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void resumesWithoutLossWhenTheConnectionIsCut(Transport transport) throws Exception {
        String ch = channel("cut-" + transport);
        Recorder recorder = new Recorder();
        try (TcpProxy proxy = new TcpProxy(server.port);
                Subscription s = subscribeLive(
                        new PushClient(proxy.url(), options()), publisher, ch, transport, recorder)) {
            CompletableFuture<Void> publishing = CompletableFuture.runAsync(() -> {
                try {
                    publishRange(ch, 0, 500);
                    proxy.cutAll(); // what follows can only arrive over a new connection
                    publishRange(ch, 500, 1000);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            for (int cut = 250; cut <= 1000; cut += 250) {
                recorder.awaitMessages(cut);
                proxy.cutAll();
            }
            publishing.get(Recorder.WAIT_MILLIS, TimeUnit.MILLISECONDS);
            recorder.awaitMessages(1001);
            List<Message> got = recorder.messages();
            assertSequence(got.subList(1, got.size()), 0, 1000);
            assertTrue(recorder.gaps.isEmpty(), recorder.gaps.toString());
            assertTrue(proxy.accepted() >= 2, "the client reconnected");
        }
    }

    /** The number of held subscriptions of one transport the server counts in its /stats. */
    static long held(Transport transport) throws Exception {
        HttpURLConnection conn = Http.open(new URL(server.url + "/stats"), 5000, 5000);
        try {
            Map<?, ?> connections = (Map<?, ?>) Http.readObject(conn.getInputStream()).get("connections");
            return (Long) connections.get(transport == Transport.LONGPOLL ? "longpoll" : transport.path());
        } finally {
            conn.disconnect();
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void aDropBeforeTheFirstMessageLosesNothing(Transport transport) throws Exception {
        String ch = channel("fresh-" + transport);
        Recorder recorder = new Recorder();
        // slow retries: the message is published before the client is back
        PushOptions slow = new PushOptions().heartbeatSeconds(1).reconnectDelay(400, 800).pollTimeoutSeconds(5);
        try (TcpProxy proxy = new TcpProxy(server.port);
                Subscription s = new PushClient(proxy.url(), slow)
                        .subscribe(Collections.singletonList(ch), transport, null, recorder)) {
            long deadline = System.currentTimeMillis() + Recorder.WAIT_MILLIS;
            while (held(transport) < 1) {
                assertTrue(System.currentTimeMillis() < deadline, "the subscription was never held");
                Thread.sleep(10);
            }
            proxy.cutAll();
            publisher.publish(ch, "{\"n\": 1}");
            recorder.awaitMessages(1);
            assertEquals(1L, n(recorder.messages().get(0)));
            assertEquals(recorder.messages().get(0).cursor(), s.cursor());
        }
    }

    @ParameterizedTest
    @EnumSource(value = Transport.class, names = {"STREAM", "SSE"})
    void detectsADeadStreamByTheHeartbeatWindow(Transport transport) throws Exception {
        String ch = channel("dead-" + transport);
        Recorder recorder = new Recorder();
        try (TcpProxy proxy = new TcpProxy(server.port);
                Subscription s = subscribeLive(
                        new PushClient(proxy.url(), options()), publisher, ch, transport, recorder)) {
            proxy.freezeAll();
            publishRange(ch, 0, 10);
            recorder.awaitMessages(11);
            List<Message> got = recorder.messages();
            assertSequence(got.subList(1, got.size()), 0, 10);
            synchronized (recorder) {
                assertTrue(recorder.causes.stream().anyMatch(c -> c instanceof SocketTimeoutException),
                        "dropped for silence: " + recorder.causes);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void reconnectNowMakesANewConnectionAndLosesNothing(Transport transport) throws Exception {
        String ch = channel("now-" + transport);
        Recorder recorder = new Recorder();
        try (Subscription s = subscribeLive(ch, transport, recorder)) {
            publishRange(ch, 0, 10);
            s.reconnectNow();
            publishRange(ch, 10, 20);
            recorder.awaitMessages(21);
            recorder.awaitState(ConnectionState.CONNECTED, 2);
            List<Message> got = recorder.messages();
            assertSequence(got.subList(1, got.size()), 0, 20);
            synchronized (recorder) {
                assertTrue(recorder.causes.stream().anyMatch(
                        c -> c != null && "reconnect requested".equals(c.getMessage())), recorder.causes.toString());
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void resumesFromTheSavedCursorAfterClose(Transport transport) throws Exception {
        String ch = channel("saved-" + transport);
        PushClient client = new PushClient(server.url, options());
        Recorder first = new Recorder();
        Subscription s = subscribeLive(client, publisher, ch, transport, first);
        publishRange(ch, 0, 300);
        first.awaitMessages(301);
        s.close();
        assertTrue(s.awaitTermination(10, TimeUnit.SECONDS));
        String saved = s.cursor();
        assertEquals(first.messages().get(300).cursor(), saved);

        publishRange(ch, 300, 600);
        Recorder second = new Recorder();
        try (Subscription resumed = client.subscribe(Collections.singletonList(ch), transport, saved, second)) {
            publishRange(ch, 600, 601);
            second.awaitMessages(301);
            assertSequence(second.messages(), 300, 601);
            assertTrue(second.gaps.isEmpty(), second.gaps.toString());
        }
        assertEquals(301, first.messageCount(), "nothing is delivered after close");
        assertEquals(ConnectionState.CLOSED, first.states.get(first.states.size() - 1));
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void deliversEachChannelOfAMultiChannelSubscriptionInOrder(Transport transport) throws Exception {
        String a = channel("multi-a-" + transport);
        String b = channel("multi-b-" + transport);
        Recorder recorder = new Recorder();
        PushClient client = new PushClient(server.url, options());
        publisher.publish(a, "{\"n\": -1}");
        publisher.publish(b, "{\"n\": -1}");
        try (Subscription s = client.subscribe(Arrays.asList(a, b), transport, null, recorder)) {
            recorder.awaitMessages(2);
            for (int i = 0; i < 50; i++) {
                publisher.publish(i % 2 == 0 ? a : b, "{\"n\": " + i + "}");
            }
            recorder.awaitMessages(52);
            List<Message> got = recorder.messages();
            for (String ch : Arrays.asList(a, b)) {
                long last = 0;
                for (Message m : got) {
                    if (m.channel().equals(ch)) {
                        assertEquals(last + 1, m.id(), ch + " ids in order");
                        last = m.id();
                    }
                }
                assertEquals(26, last, ch + ": probe + 25 messages");
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void deliversLargeMultiByteMessagesIntact(Transport transport) throws Exception {
        String ch = channel("large-" + transport);
        StringBuilder text = new StringBuilder();
        while (text.length() < 20000) {
            text.append("é€\uD83D\uDE00 line\n");   // 2-, 3- and 4-byte UTF-8, and newlines inside
        }
        Recorder recorder = new Recorder();
        try (Subscription s = subscribeLive(ch, transport, recorder)) {
            publisher.publishText(ch, text.toString());
            publisher.publish(ch, Json.write(Collections.singletonMap("big", text.toString())));
            recorder.awaitMessages(3);
            assertEquals(text.toString(), recorder.messages().get(1).data());
            assertEquals(Collections.singletonMap("big", text.toString()), recorder.messages().get(2).data());
        }
    }

    @Test
    void pollCatchesUpFromACursorOnTheCallingThread() throws Exception {
        String ch = channel("poll");
        PushClient client = new PushClient(server.url, options());
        publisher.publish(ch, "{\"n\": -1}");
        Recorder recorder = new Recorder();
        String first = client.poll(Collections.singletonList(ch), null, 0, recorder);
        assertEquals(1, recorder.messageCount(), "history=1 gives the probe");
        assertEquals(recorder.messages().get(0).cursor(), first);

        publishRange(ch, 0, 5);
        String second = client.poll(Collections.singletonList(ch), first, 0, recorder);
        List<Message> got = recorder.messages();
        assertSequence(got.subList(1, got.size()), 0, 5);
        assertEquals(got.get(5).cursor(), second);

        assertEquals(second, client.poll(Collections.singletonList(ch), second, 0, recorder), "nothing new");
        assertEquals(6, recorder.messageCount());
        PushException bad = org.junit.jupiter.api.Assertions.assertThrows(PushException.class,
                () -> client.poll(Collections.singletonList(ch), "not-a-cursor", 0, recorder));
        assertEquals("bad_cursor", bad.code());
    }

    @Test
    void aFinalErrorClosesTheSubscriptionWithATypedException() throws Exception {
        Recorder recorder = new Recorder();
        Subscription s = new PushClient(server.url, options())
                .subscribe(Collections.singletonList("not a channel!"), Transport.STREAM, null, recorder);
        recorder.awaitState(ConnectionState.CLOSED, 1);
        assertTrue(s.awaitTermination(10, TimeUnit.SECONDS));
        PushException e;
        synchronized (recorder) {
            e = assertInstanceOf(PushException.class, recorder.causes.get(recorder.causes.size() - 1));
        }
        assertEquals(400, e.status());
        assertEquals("bad_channel", e.code());
        assertTrue(s.isClosed());
    }
}
