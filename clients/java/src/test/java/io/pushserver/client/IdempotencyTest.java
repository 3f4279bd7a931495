package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.function.IntSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Idempotent publishing: every publish carries a key made by the client, the same on each retry,
 * so a publish cut after it was sent, retried, is delivered once.
 */
class IdempotencyTest {
    private static final String KEY = "s3cret";
    private static final Pattern UUID_V4 =
            Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    private static final Pattern HEADER_KEY = Pattern.compile("(?im)^Idempotency-Key: *(\\S+)\\r?$");
    private static final Pattern LENGTH = Pattern.compile("(?im)^Content-Length: *(\\d+)\\r?$");

    private static TestServer server;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start("--publish-key", KEY, "--heartbeat", "1");
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    private static PushOptions fast() {
        return SubscribeTest.options().publishKey(KEY).reconnectDelay(10, 50);
    }

    /**
     * Cuts the first {@code count} connections after {@code bytes} bytes of the server's answer
     * (so after the request reached it), and lets the others through.
     */
    private static IntSupplier cutFirst(int count, int bytes) {
        int[] left = {count};
        return () -> left[0]-- > 0 ? bytes : Integer.MAX_VALUE;
    }

    /**
     * The requests a proxy saw as [head, body], split by their Content-Length. A request counts
     * once its head is whole; the last one's body may still be on its way through the proxy (a
     * server may answer a refused head before reading the body), so it is what arrived so far.
     */
    private static List<String[]> requests(TcpProxy proxy) {
        String text = proxy.sent();
        List<String[]> found = new ArrayList<>();
        for (int at = 0, end; (end = text.indexOf("\r\n\r\n", at)) >= 0; ) {
            String head = text.substring(at, end);
            Matcher length = LENGTH.matcher(head);
            int bodyEnd = end + 4 + (length.find() ? Integer.parseInt(length.group(1)) : 0);
            at = Math.min(bodyEnd, text.length());
            found.add(new String[] {head, text.substring(end + 4, at)});
        }
        return found;
    }

    private static String headerKey(String[] request) {
        Matcher m = HEADER_KEY.matcher(request[0]);
        return m.find() ? m.group(1) : null;
    }

    /** A stream subscription to {@code channel} from now on, directly on the server. */
    private static Subscription follow(String channel, Recorder recorder) throws Exception {
        PushClient client = new PushClient(server.url, fast());
        List<String> channels = Collections.singletonList(channel);
        String cursor = client.poll(channels, null, 0, new Recorder());
        return client.subscribe(channels, Transport.STREAM, cursor, recorder);
    }

    private static List<Object> data(Recorder recorder) {
        return recorder.messages().stream().map(Message::data).collect(Collectors.toList());
    }

    /** Cut before any byte of the answer, and inside its status line ("HTTP/1.1 20"). */
    @ParameterizedTest
    @ValueSource(ints = {0, 11})
    void aPublishCutAfterItWasSentIsRetriedWithItsKeyAndDeliveredOnce(int answerBytes) throws Exception {
        String ch = SubscribeTest.channel("cut-once");
        Recorder recorder = new Recorder();
        try (Subscription s = follow(ch, recorder);
                TcpProxy proxy = new TcpProxy(server.port, cutFirst(1, answerBytes))) {
            PublishResult first = new PushClient(proxy.url(), fast()).publishText(ch, "once");
            PublishResult next = new PushClient(server.url, fast()).publishText(ch, "after");
            recorder.awaitMessages(2);
            assertEquals(1, proxy.cuts(), "the first attempt was cut");
            List<String[]> tries = requests(proxy);
            assertEquals(2, tries.size());
            String key = headerKey(tries.get(0));
            assertTrue(UUID_V4.matcher(key).matches(), key);
            assertEquals(key, headerKey(tries.get(1)));
            assertEquals(1, first.id());
            assertEquals(2, next.id());
            assertEquals(Arrays.asList("m:" + ch + ":1", "m:" + ch + ":2"), recorder.events);
            assertEquals(Arrays.asList("once", "after"), data(recorder));
        }
    }

    @Test
    void aBatchRepeatingItsItemsKeysAnswersTheOriginalIds() throws Exception {
        String ch = SubscribeTest.channel("batch");
        PushClient client = new PushClient(server.url, fast());
        Recorder recorder = new Recorder();
        try (Subscription s = follow(ch, recorder)) {
            List<PublishResult> first = client.publishBatch(Arrays.asList(
                    new PublishItem(ch, "\"a\"", "k-a"), new PublishItem(ch, "\"b\"", "k-b")));
            List<PublishResult> again = client.publishBatch(Arrays.asList(
                    new PublishItem(ch, "\"b, again\"", "k-b"), new PublishItem(ch, "\"c\""),
                    new PublishItem(ch, "\"a, again\"", "k-a")));
            assertEquals(Arrays.asList(1L, 2L), ids(first));
            assertEquals(Arrays.asList(2L, 3L, 1L), ids(again));
            assertEquals(4, client.publishText(ch, "d").id());
            recorder.awaitMessages(4);
            assertEquals(Arrays.asList("a", "b", "c", "d"), data(recorder));
        }
    }

    private static List<Long> ids(List<PublishResult> results) {
        return results.stream().map(PublishResult::id).collect(Collectors.toList());
    }

    @Test
    void everyPublishAndBatchItemCarriesANewKeyTheServerRemembers() throws Exception {
        String ch = SubscribeTest.channel("keys");
        try (TcpProxy proxy = new TcpProxy(server.port)) {
            PushClient client = new PushClient(proxy.url(), fast());
            client.publish(ch, "1");
            client.publishText(ch, "2");
            client.publishBatch(Arrays.asList(new PublishItem(ch, "3"), new PublishItem(ch, "4")));
            List<String[]> tries = requests(proxy);
            assertEquals(3, tries.size());
            List<String> keys = new ArrayList<>(Arrays.asList(headerKey(tries.get(0)), headerKey(tries.get(1))));
            assertNull(headerKey(tries.get(2)));
            for (Object item : (List<?>) Json.parse(tries.get(2)[1])) {
                keys.add((String) ((Map<?, ?>) item).get("idempotency_key"));
            }
            for (String key : keys) {
                assertTrue(UUID_V4.matcher(key).matches(), key);
            }
            assertEquals(4, new HashSet<>(keys).size());
            PushClient direct = new PushClient(server.url, fast());
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(i + 1, direct.publishText(ch, "republished", keys.get(i)).id());
            }
            assertEquals(5, direct.publish(ch, "5").id());
        }
    }

    @Test
    void aPublishWhoseEveryAttemptIsCutIsAnOutcomeUnknownWithItsKey() throws Exception {
        String ch = SubscribeTest.channel("unknown");
        Recorder recorder = new Recorder();
        try (Subscription s = follow(ch, recorder);
                TcpProxy proxy = new TcpProxy(server.port, cutFirst(3, 0))) {
            PushClient client = new PushClient(proxy.url(), fast().publishRetries(2));
            OutcomeUnknownException e = assertThrows(OutcomeUnknownException.class,
                    () -> client.publishText(ch, "maybe"));
            assertEquals("outcome_unknown", e.code());
            assertEquals(3, e.attempts());
            assertEquals(3, requests(proxy).size());
            String key = e.idempotencyKeys().get(0);
            assertTrue(UUID_V4.matcher(key).matches(), key);
            PushClient direct = new PushClient(server.url, fast());
            assertEquals(1, direct.publishText(ch, "maybe", key).id());
            direct.publishText(ch, "after");
            recorder.awaitMessages(2);
            assertEquals(Arrays.asList("maybe", "after"), data(recorder));
        }
    }

    @Test
    void aFourHundredOtherThan429IsFinal() throws Exception {
        try (TcpProxy proxy = new TcpProxy(server.port)) {
            PushClient client = new PushClient(proxy.url(), fast().publishKey("wrong"));
            PushException e = assertThrows(PushException.class,
                    () -> client.publish(SubscribeTest.channel("final"), "1"));
            assertEquals(401, e.status());
            assertFalse(e instanceof OutcomeUnknownException);
            assertEquals(1, requests(proxy).size());
        }
    }

    @Test
    void aBatchItemMustBeJson() {
        assertThrows(JsonException.class, () -> new PublishItem("news", "1}, {\"channel\": \"x\""));
    }

    @Test
    void a429IsRetriedAfterItsRetryAfterWithTheSameKey() throws Exception {
        String ch = SubscribeTest.channel("rate");
        try (TestServer limited = TestServer.start("--max-publish-rate", "1");
                TcpProxy proxy = new TcpProxy(limited.port)) {
            PushClient client = new PushClient(proxy.url(), SubscribeTest.options().reconnectDelay(10, 50));
            assertEquals(1, client.publish(ch, "1").id());
            assertEquals(2, client.publish(ch, "2").id());
            List<String[]> tries = requests(proxy);
            assertTrue(tries.size() >= 3, "the second publish was refused at least once");
            List<String> keys = tries.stream().map(IdempotencyTest::headerKey).collect(Collectors.toList());
            assertEquals(1, new HashSet<>(keys.subList(1, keys.size())).size());
            assertNotEquals(keys.get(0), keys.get(1));
        }
    }
}
