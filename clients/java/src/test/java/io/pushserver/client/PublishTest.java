package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class PublishTest {
    private static TestServer server;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start("--publish-key", "s3cret", "--heartbeat", "1");
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    private static PushClient client(String key) {
        return new PushClient(server.url, SubscribeTest.options().publishKey(key));
    }

    @Test
    void publishAnswersWithIdTimeAndSubscribers() throws Exception {
        String ch = SubscribeTest.channel("pub");
        PushClient client = client("s3cret");
        PublishResult first = client.publish(ch, "{\"n\": -1}");
        assertEquals(ch, first.channel());
        assertEquals(1, first.id());
        assertTrue(first.ts() > 1.6e9, "ts is epoch seconds");
        assertEquals(0, first.subscribers());

        Recorder recorder = new Recorder();
        try (Subscription s = client.subscribe(Collections.singletonList(ch), Transport.STREAM, null, recorder)) {
            recorder.awaitMessages(1);
            recorder.awaitState(ConnectionState.CONNECTED, 1); // the stream is held: it counts below
            Map<String, Object> value = new LinkedHashMap<>();
            value.put("text", "héllo \"world\"");
            value.put("list", java.util.Arrays.asList(1L, 2.5, null, true));
            PublishResult json = client.publish(ch, Json.write(value));
            PublishResult text = client.publishText(ch, "plain ünïcode text");
            assertEquals(2, json.id());
            assertEquals(3, text.id());
            assertEquals(1, json.subscribers());
            recorder.awaitMessages(3);
            assertEquals(value, recorder.messages().get(1).data());
            assertEquals(Json.write(value), recorder.messages().get(1).dataJson());
            assertEquals("plain ünïcode text", recorder.messages().get(2).data());
        }
    }

    @Test
    void aWrongOrMissingKeyIsUnauthorized() {
        for (String key : new String[] {"wrong", null}) {
            UnauthorizedException e = assertThrows(UnauthorizedException.class,
                    () -> client(key).publish("news", "{}"));
            assertEquals(401, e.status());
            assertEquals("unauthorized", e.code());
            assertTrue(!e.serverMessage().isEmpty());
        }
    }

    @Test
    void badInputIsATypedError() {
        PushException badJson = assertThrows(PushException.class, () -> client("s3cret").publish("news", "{nope"));
        assertEquals(400, badJson.status());
        assertEquals("bad_json", badJson.code());
        PushException badChannel = assertThrows(PushException.class,
                () -> client("s3cret").publish("no spaces allowed", "{}"));
        assertEquals(400, badChannel.status());
        assertEquals("bad_channel", badChannel.code());
    }
}
