package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Replays the shared wire transcripts (tests/conformance/, see its README) through this client's
 * own units: {@link Framing} fed the body in the transcript's reads, {@link Http#error} for error
 * answers, {@link Backoff} and {@link PollLimit}. No server runs: the bytes are the server's. The
 * folder is the system property {@code pushserver.conformance}, else ../../tests/conformance.
 *
 * <p>Compressed cases are decoded by the JDK ({@link java.util.zip.GZIPInputStream}), so a
 * subscription reads them from a loopback server, one read at a time: each read is sent once the
 * subscription has delivered every event the reads before it completed.
 */
class ConformanceTest {
    /**
     * Transcript kinds of a transport this client does not have, or a framing it never asks
     * for (the compact SSE framing is for EventSource).
     */
    private static final Set<String> NOT_SPOKEN = new HashSet<>(Arrays.asList("jsonp", "websocket", "sse_compact"));
    private static final Set<String> REPLAYED = new HashSet<>(Arrays.asList(
            "longpoll", "ndjson", "sse", "error", "retry_after", "backoff", "backoff_sequence", "poll_limit"));

    private static File folder() {
        return new File(System.getProperty("pushserver.conformance", "../../tests/conformance"));
    }

    private static List<Map<String, Object>> cases() throws IOException {
        File[] files = folder().listFiles((dir, name) -> name.endsWith(".json"));
        assertTrue(files != null && files.length > 0, "no transcripts in " + folder().getAbsolutePath());
        Arrays.sort(files);
        List<Map<String, Object>> cases = new ArrayList<>();
        for (File file : files) {
            cases.add(Json.parseObject(new String(Files.readAllBytes(file.toPath()), StandardCharsets.UTF_8)));
        }
        return cases;
    }

    /** The cases of {@code kinds} whose bytes are not compressed. */
    private static List<Map<String, Object>> cases(String... kinds) throws IOException {
        return cases(false, kinds);
    }

    private static List<Map<String, Object>> cases(boolean compressed, String... kinds) throws IOException {
        List<String> wanted = Arrays.asList(kinds);
        List<Map<String, Object>> picked = new ArrayList<>();
        for (Map<String, Object> c : cases()) {
            if (wanted.contains(c.get("kind")) && c.containsKey("content_encoding") == compressed) {
                picked.add(c);
            }
        }
        return picked;
    }

    @Test
    void everyTranscriptIsReplayedOrNamesATransportThisClientLacks() throws IOException {
        for (Map<String, Object> c : cases()) {
            Object kind = c.get("kind");
            assertTrue(REPLAYED.contains(kind) || NOT_SPOKEN.contains(kind), c.get("case") + ": " + kind);
        }
    }

    @TestFactory
    List<DynamicTest> bodiesGiveTheEventsTheTranscriptsExpect() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (final Map<String, Object> c : cases("longpoll", "ndjson", "sse")) {
            tests.add(DynamicTest.dynamicTest((String) c.get("case"), () -> {
                if (c.containsKey("error")) {
                    assertThrows(IOException.class, () -> replay(c));
                } else {
                    assertEquals(c.get("expect"), replay(c));
                }
            }));
        }
        return tests;
    }

    @TestFactory
    List<DynamicTest> compressedAnswersGiveEachEventAsItsBytesArrive() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (final Map<String, Object> c : cases(true, "longpoll", "ndjson", "sse")) {
            tests.add(DynamicTest.dynamicTest((String) c.get("case"), () -> Lockstep.replay(c)));
        }
        assertTrue(tests.size() >= 3, "compressed transcripts");
        return tests;
    }

    @TestFactory
    List<DynamicTest> errorAnswersAreClassifiedAsTheTranscriptsSay() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (final Map<String, Object> c : cases("error")) {
            tests.add(DynamicTest.dynamicTest((String) c.get("case"), () -> {
                int status = ((Long) c.get("status")).intValue();
                Object retryAfter = ((Map<?, ?>) c.get("headers")).get("Retry-After");
                PushException error = Http.error(status, (String) c.get("body"), (String) retryAfter, "reason");
                Map<?, ?> expect = (Map<?, ?>) c.get("expect");
                assertEquals(status, error.status());
                assertEquals(expect.get("code"), error.code());
                if (expect.get("message") != null) {
                    assertEquals(expect.get("message"), error.serverMessage());
                }
                assertEquals(expect.get("action"), error.isRetryable() ? "retry" : "final");
                assertEquals(expect.get("retry_after"), seconds(error.retryAfterSeconds()));
            }));
        }
        return tests;
    }

    @Test
    void retryAfterValues() throws IOException {
        for (Map<String, Object> c : cases("retry_after")) {
            for (Object item : (List<?>) c.get("vectors")) {
                Map<?, ?> vector = (Map<?, ?>) item;
                long read = Http.retryAfterSeconds((String) vector.get("header"));
                assertEquals(vector.get("seconds"), seconds(read), String.valueOf(vector));
            }
        }
    }

    @Test
    void backoffDefaultsAndBounds() throws IOException {
        PushOptions defaults = new PushOptions();
        for (Map<String, Object> c : cases("backoff")) {
            assertEquals(millis(c.get("initial")), defaults.reconnectMinMillis());
            assertEquals(millis(c.get("maximum")), defaults.reconnectMaxMillis());
            Backoff backoff = backoff(0.0);
            for (Object item : (List<?>) c.get("bounds")) {
                Map<?, ?> vector = (Map<?, ?>) item;
                long[] expected = {millis(vector.get("low")), millis(vector.get("high"))};
                assertArrayEquals(expected, backoff.bounds(((Long) vector.get("attempt")).intValue()));
            }
            for (Object item : (List<?>) c.get("with_retry_after")) {
                Map<?, ?> vector = (Map<?, ?>) item;
                long[] delays = new long[2];
                double[] draws = {0.0, Math.nextDown(1.0)}; // the random draw at each end of its range
                for (int i = 0; i < 2; i++) {
                    Backoff fresh = backoff(draws[i]);
                    for (long n = (Long) vector.get("attempt"); n > 1; n--) {
                        fresh.next();
                    }
                    delays[i] = fresh.next((Long) vector.get("retry_after"));
                }
                long[] expected = {millis(vector.get("low")), millis(vector.get("high"))};
                assertArrayEquals(expected, delays, String.valueOf(vector));
            }
        }
    }

    @Test
    void progressRestartsTheRetryCount() throws IOException {
        for (Map<String, Object> c : cases("backoff_sequence")) {
            for (Object item : (List<?>) c.get("sequences")) {
                Map<?, ?> sequence = (Map<?, ?>) item;
                Backoff backoff = backoff(0.5);
                List<Object> numbers = new ArrayList<>();
                for (Object attempt : (List<?>) sequence.get("attempts")) {
                    if ("progress".equals(attempt)) {
                        backoff.reset();
                    }
                    backoff.next();
                    numbers.add((long) backoff.failures());
                }
                assertEquals(sequence.get("retries"), numbers, String.valueOf(sequence));
            }
        }
    }

    @Test
    void pollLimitFollowsCutAndWholeAnswers() throws IOException {
        for (Map<String, Object> c : cases("poll_limit")) {
            assertEquals(((Long) c.get("default_cap")).intValue(), new PushOptions().pollLimit());
            for (Object item : (List<?>) c.get("sequences")) {
                Map<?, ?> sequence = (Map<?, ?>) item;
                PollLimit limit = new PollLimit(((Long) sequence.get("cap")).intValue());
                List<Object> seen = new ArrayList<>();
                for (Object poll : (List<?>) sequence.get("polls")) {
                    if ("cut".equals(poll)) {
                        limit.cut();
                    } else if ("whole".equals(poll)) {
                        limit.answered();
                    }
                    seen.add((long) limit.value());
                }
                assertEquals(sequence.get("limits"), seen, String.valueOf(sequence));
            }
        }
    }

    /** Feeds the transcript's body to {@link Framing}, in its reads; the events in its notation. */
    private static List<Object> replay(Map<String, Object> c) throws IOException {
        Transport transport = "sse".equals(c.get("kind")) ? Transport.SSE
                : "ndjson".equals(c.get("kind")) ? Transport.STREAM : Transport.LONGPOLL;
        Object splits = c.get("splits");
        Collected sink = new Collected();
        Framing.read(transport, new Reads(((String) c.get("body")).getBytes(StandardCharsets.UTF_8),
                splits == null ? Collections.emptyList() : (List<?>) splits), sink);
        return sink.events;
    }

    private static Backoff backoff(final double draw) {
        PushOptions defaults = new PushOptions();
        return new Backoff(defaults.reconnectMinMillis(), defaults.reconnectMaxMillis(), new Random() {
            private static final long serialVersionUID = 1L;

            @Override
            public double nextDouble() {
                return draw;
            }
        });
    }

    private static long millis(Object seconds) {
        return Math.round(((Number) seconds).doubleValue() * 1000);
    }

    private static Object seconds(long retryAfter) {
        return retryAfter < 0 ? null : (Object) retryAfter;
    }

    /** A message in the transcripts' notation. */
    static Map<String, Object> notation(Message m) {
        Map<String, Object> fields = entry("channel", m.channel());
        fields.put("id", m.id());
        fields.put("ts", m.ts());
        fields.put("data", m.data());
        fields.put("cursor", m.cursor());
        return entry("message", fields);
    }

    private static Map<String, Object> entry(String key, Object value) {
        Map<String, Object> map = new LinkedHashMap<>();
        map.put(key, value);
        return map;
    }

    /** The events {@link Framing} hands over, in the transcripts' notation. */
    private static final class Collected implements Framing.Sink {
        final List<Object> events = new ArrayList<>();

        @Override
        public void message(Message m) {
            events.add(notation(m));
        }

        @Override
        public void gap(Gap g) {
            Map<String, Object> fields = entry("channel", g.channel());
            fields.put("from", g.from());
            fields.put("to", g.to());
            fields.put("reason", g.reason());
            fields.put("cursor", g.cursor());
            events.add(entry("gap", fields));
        }

        @Override
        public void control(String type, Map<String, Object> event) {
            if ("reconnect".equals(type)) {
                events.add(entry("reconnect", entry("cursor", event.get("cursor"))));
            } else if ("expired".equals(type)) {
                events.add(entry("expired", Collections.emptyMap()));
            }
        }

        @Override
        public void cursor(String cursor) {
            events.add(entry("checkpoint", cursor));
        }
    }

    /** A body that arrives in the transcript's reads: no read crosses a split. */
    private static final class Reads extends InputStream {
        private final byte[] body;
        private final List<?> splits;
        private int at;

        Reads(byte[] body, List<?> splits) {
            this.body = body;
            this.splits = splits;
        }

        @Override
        public int read() {
            byte[] one = new byte[1];
            return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
        }

        @Override
        public int read(byte[] buf, int off, int len) {
            if (at >= body.length) {
                return -1;
            }
            int end = body.length;
            for (Object split : splits) {
                int edge = ((Long) split).intValue();
                if (edge > at) {
                    end = Math.min(end, edge);
                    break;
                }
            }
            int n = Math.min(len, end - at);
            System.arraycopy(body, at, buf, off, n);
            at += n;
            return n;
        }
    }
}
