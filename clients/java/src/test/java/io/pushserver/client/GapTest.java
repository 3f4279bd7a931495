package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class GapTest {
    private static TestServer server;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start("--history-size", "5", "--heartbeat", "1");
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    @ParameterizedTest
    @EnumSource(Transport.class)
    void aStaleCursorGetsAGapThenWhatIsStillBuffered(Transport transport) throws Exception {
        String ch = SubscribeTest.channel("gap-" + transport);
        PushClient client = new PushClient(server.url, SubscribeTest.options());
        Recorder first = new Recorder();
        Subscription s = SubscribeTest.subscribeLive(client, client, ch, transport, first);
        s.close();
        assertEquals(true, s.awaitTermination(10, TimeUnit.SECONDS));
        for (int i = 0; i < 20; i++) {
            client.publish(ch, "{\"n\": " + i + "}");
        }

        Recorder second = new Recorder();
        try (Subscription resumed = client.subscribe(Collections.singletonList(ch), transport, s.cursor(), second)) {
            second.awaitMessages(5);
            List<String> expected = new ArrayList<>();
            expected.add("gap:" + ch + ":2-16:expired");
            for (int id = 17; id <= 21; id++) {
                expected.add("m:" + ch + ":" + id);
            }
            synchronized (second) {
                assertEquals(expected, second.events);
                assertNotNull(second.gaps.get(0).cursor());
            }
            SubscribeTest.assertSequence(second.messages(), 15, 20);
        }
    }
}
