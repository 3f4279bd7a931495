package io.pushserver.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UnsupportedEncodingException;
import java.net.HttpURLConnection;
import java.net.ProtocolException;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.Charset;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/** The few HttpURLConnection chores every request shares: encoding, opening, bodies, errors. */
final class Http {
    static final Charset UTF_8 = Charset.forName("UTF-8");
    /** How long a publish may take to be answered. */
    static final int REQUEST_READ_TIMEOUT_MILLIS = 30000;
    private static final int POLL_READ_GRACE_MILLIS = 10000;
    private static final String HEX = "0123456789ABCDEF";

    private Http() {}

    /** Percent-encodes a path segment, keeping the characters channel names are made of. */
    static String pathSegment(String segment) {
        StringBuilder out = new StringBuilder();
        for (byte b : segment.getBytes(UTF_8)) {
            char c = (char) (b & 0xff);
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                    || "-._~:@".indexOf(c) >= 0) {
                out.append(c);
            } else {
                out.append('%').append(HEX.charAt(c >> 4)).append(HEX.charAt(c & 0xf));
            }
        }
        return out.toString();
    }

    /** Appends {@code name=value} to a query being built, skipping null values. */
    static void param(StringBuilder query, String name, Object value) {
        if (value == null) {
            return;
        }
        query.append(query.length() == 0 ? '?' : '&').append(name).append('=');
        try {
            query.append(URLEncoder.encode(value.toString(), "UTF-8"));
        } catch (UnsupportedEncodingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    /** A long-poll may be held {@code timeoutSeconds}; only silence beyond that means trouble. */
    static int pollReadTimeoutMillis(int timeoutSeconds) {
        return timeoutSeconds * 1000 + POLL_READ_GRACE_MILLIS;
    }

    static HttpURLConnection open(URL url, int connectTimeoutMillis, int readTimeoutMillis)
            throws IOException {
        HttpURLConnection conn = (HttpURLConnection) url.openConnection();
        conn.setConnectTimeout(connectTimeoutMillis);
        conn.setReadTimeout(readTimeoutMillis);
        conn.setUseCaches(false);
        return conn;
    }

    /**
     * Asks for a gzip-encoded answer. Set by hand, it also keeps Android's HttpURLConnection from
     * decoding on its own: {@link #body} does it, the same on every JVM.
     */
    static void acceptGzip(HttpURLConnection conn) {
        conn.setRequestProperty("Accept-Encoding", "gzip");
    }

    /**
     * A successful answer's body, decoded when the server sent it gzip-encoded. The server sends
     * the gzip header with the answer's head and flushes every message, and GZIPInputStream
     * returns what each read inflates: a held stream delivers each message as it arrives.
     */
    static InputStream body(HttpURLConnection conn) throws IOException {
        InputStream in = conn.getInputStream();
        return "gzip".equalsIgnoreCase(conn.getContentEncoding()) ? new GZIPInputStream(in) : in;
    }

    /**
     * The answer's status. A connection cut inside the status line leaves the JDK with none (-1)
     * or a truncated one ({@code HTTP/1.1 20} reads as 20): both are a broken connection.
     */
    static int status(HttpURLConnection conn) throws IOException {
        int status = conn.getResponseCode();
        if (status < 100) {
            throw new ProtocolException("no valid HTTP status line (the connection broke in it)");
        }
        return status;
    }

    static byte[] readAll(InputStream in) throws IOException {
        if (in == null) {
            return new byte[0];
        }
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            for (int n; (n = in.read(buf)) != -1; ) {
                out.write(buf, 0, n);
            }
            return out.toByteArray();
        } finally {
            in.close();
        }
    }

    /** Reads a successful answer as a JSON object. */
    static Map<String, Object> readObject(InputStream in) throws IOException {
        return object(readJson(in));
    }

    /** Reads a successful answer as a JSON value; malformed JSON is a protocol error. */
    static Object readJson(InputStream in) throws IOException {
        String body = new String(readAll(in), UTF_8);
        try {
            return Json.parse(body);
        } catch (JsonException e) {
            throw new ProtocolException(e.getMessage());
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> object(Object value) throws ProtocolException {
        if (!(value instanceof Map)) {
            throw new ProtocolException("expected a JSON object, got " + value);
        }
        return (Map<String, Object>) value;
    }

    /** Turns an error answer into a typed exception, keeping the server's code and message. */
    static PushException error(HttpURLConnection conn, int status) throws IOException {
        String body = new String(readAll(conn.getErrorStream()), UTF_8);
        return error(status, body, conn.getHeaderField("Retry-After"), conn.getResponseMessage());
    }

    /**
     * An error answer as its typed exception: the server's code and message from its JSON body,
     * else {@code http_<status>} and the text (a proxy's page) or the status line's reason.
     */
    static PushException error(int status, String body, String retryAfter, String reason) {
        String code = "http_" + status;
        String message = body.isEmpty() ? String.valueOf(reason) : body;
        try {
            Map<String, Object> error = Json.parseObject(body);
            if (error.get("error") instanceof String) {
                code = (String) error.get("error");
            }
            if (error.get("message") instanceof String) {
                message = (String) error.get("message");
            }
        } catch (JsonException notJson) {
            // a proxy's error page: keep the status and the text
        }
        if (status == 401) {
            // A streamed request (a publish) loses a 401's body inside HttpURLConnection, and
            // 401 has only the one code.
            return new UnauthorizedException(body.isEmpty() ? "unauthorized" : code, message);
        }
        return new PushException(status, code, message, retryAfterSeconds(retryAfter));
    }

    /**
     * Retry-After as docs/protocol.md reads it: ASCII digits are seconds; anything else (an HTTP
     * date, a sign, decimals) is ignored: -1.
     */
    static long retryAfterSeconds(String value) {
        String digits = value == null ? "" : value.replaceAll("^[ \t]+|[ \t]+$", "");
        if (!digits.matches("[0-9]{1,18}")) {
            return -1;
        }
        return Long.parseLong(digits);
    }
}
