package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Subscribe tokens (server --subscribe-secret): renewal on expiry, and refusals as typed errors. */
class TokenTest {
    private static final String SECRET = "token-test-secret";
    private static TestServer server;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start("--subscribe-secret", SECRET, "--heartbeat", "1");
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    /** An HS256 JWT with the claims the server reads. */
    static String token(String channel, double expiresInSeconds) throws Exception {
        Base64.Encoder b64 = Base64.getUrlEncoder().withoutPadding();
        Map<String, Object> claims = new LinkedHashMap<>();
        claims.put("channels", Collections.singletonList(channel));
        claims.put("exp", System.currentTimeMillis() / 1000.0 + expiresInSeconds);
        String signed = b64.encodeToString("{\"alg\":\"HS256\",\"typ\":\"JWT\"}".getBytes(StandardCharsets.UTF_8))
                + "." + b64.encodeToString(Json.write(claims).getBytes(StandardCharsets.UTF_8));
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(SECRET.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        return signed + "." + b64.encodeToString(mac.doFinal(signed.getBytes(StandardCharsets.UTF_8)));
    }

    @ParameterizedTest
    @EnumSource(value = Transport.class, names = {"STREAM", "SSE"})
    void anExpiredTokenIsRenewedAndTheStreamResumes(Transport transport) throws Exception {
        String ch = SubscribeTest.channel("token-" + transport);
        AtomicInteger issued = new AtomicInteger();
        PushClient client = new PushClient(server.url, SubscribeTest.options().tokenProvider(() -> {
            try {
                // the first two requests (the head long-poll, then the stream) get a short token
                return token(ch, issued.incrementAndGet() <= 2 ? 3 : 600);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }));
        Recorder recorder = new Recorder();
        try (Subscription s = SubscribeTest.subscribeLive(client, client, ch, transport, recorder)) {
            recorder.await(r -> r.causes.stream().anyMatch(
                    c -> c != null && "subscribe token expired".equals(c.getMessage())), "the expired event");
            recorder.awaitState(ConnectionState.CONNECTED, 2);
            client.publish(ch, "{\"n\": 0}");
            recorder.awaitMessages(2);
            assertEquals(0L, SubscribeTest.n(recorder.messages().get(1)));
            assertTrue(recorder.gaps.isEmpty(), recorder.gaps.toString());
            assertEquals(3, issued.get());
        }
    }

    @Test
    void aBadOrForeignTokenEndsTheSubscriptionWithATypedError() throws Exception {
        String ch = SubscribeTest.channel("token-refused");
        PushException badSignature = finalError(new PushOptions().token(token(ch, 600) + "x"), ch);
        assertInstanceOf(UnauthorizedException.class, badSignature);
        assertEquals("unauthorized", badSignature.code());
        PushException otherChannel = finalError(new PushOptions().token(token("elsewhere", 600)), ch);
        assertEquals(403, otherChannel.status());
        assertEquals("forbidden", otherChannel.code());
    }

    private static PushException finalError(PushOptions options, String channel) throws Exception {
        Recorder recorder = new Recorder();
        new PushClient(server.url, options).subscribe(Collections.singletonList(channel), Transport.SSE, null, recorder);
        recorder.awaitState(ConnectionState.CLOSED, 1);
        synchronized (recorder) {
            return assertInstanceOf(PushException.class, recorder.causes.get(recorder.causes.size() - 1));
        }
    }
}
