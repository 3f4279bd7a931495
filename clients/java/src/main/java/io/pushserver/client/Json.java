package io.pushserver.client;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict RFC 8259 JSON reader and writer: the JDK has none, and the client must run without
 * dependencies (Android's {@code org.json} is lenient and absent from a plain JVM).
 *
 * <p>Values map to Java as: object = {@code Map<String, Object>} (insertion ordered), array =
 * {@code List<Object>}, string = {@code String}, integer = {@code Long} (or {@code BigDecimal} when
 * it does not fit), other numbers = {@code Double}, {@code true}/{@code false} = {@code Boolean},
 * {@code null} = {@code null}.
 */
public final class Json {
    private static final int MAX_DEPTH = 512;

    private final String text;
    private int pos;
    private int depth;

    private Json(String text) {
        this.text = text;
    }

    /** Parses one JSON value; anything but whitespace after it is an error. */
    public static Object parse(String text) {
        if (text == null) {
            throw new JsonException("no JSON text (null)");
        }
        Json reader = new Json(text);
        reader.skipWhitespace();
        Object value = reader.readValue();
        reader.skipWhitespace();
        if (reader.pos < text.length()) {
            throw reader.error("unexpected text after the JSON value");
        }
        return value;
    }

    /** Parses a JSON object, the shape of every message the server sends. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> parseObject(String text) {
        Object value = parse(text);
        if (!(value instanceof Map)) {
            throw new JsonException("expected a JSON object, got " + describe(value));
        }
        return (Map<String, Object>) value;
    }

    /** Writes a value built from maps, collections, arrays, strings, numbers, booleans and null. */
    public static String write(Object value) {
        StringBuilder out = new StringBuilder();
        writeValue(out, value, 0);
        return out.toString();
    }

    private Object readValue() {
        if (pos >= text.length()) {
            throw error("unexpected end of input, expected a value");
        }
        char c = text.charAt(pos);
        switch (c) {
            case '{':
                return readObject();
            case '[':
                return readArray();
            case '"':
                return readString();
            case 't':
                return readLiteral("true", Boolean.TRUE);
            case 'f':
                return readLiteral("false", Boolean.FALSE);
            case 'n':
                return readLiteral("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return readNumber();
                }
                throw error("unexpected character " + quoteChar(c));
        }
    }

    private Map<String, Object> readObject() {
        enter();
        pos++;
        Map<String, Object> map = new LinkedHashMap<String, Object>();
        skipWhitespace();
        if (peek() == '}') {
            pos++;
            depth--;
            return map;
        }
        while (true) {
            skipWhitespace();
            if (peek() != '"') {
                throw error("expected a string key");
            }
            String key = readString();
            skipWhitespace();
            expect(':');
            skipWhitespace();
            map.put(key, readValue());
            skipWhitespace();
            char c = next("',' or '}'");
            if (c == '}') {
                depth--;
                return map;
            }
            if (c != ',') {
                pos--;
                throw error("expected ',' or '}'");
            }
        }
    }

    private List<Object> readArray() {
        enter();
        pos++;
        List<Object> list = new ArrayList<Object>();
        skipWhitespace();
        if (peek() == ']') {
            pos++;
            depth--;
            return list;
        }
        while (true) {
            skipWhitespace();
            list.add(readValue());
            skipWhitespace();
            char c = next("',' or ']'");
            if (c == ']') {
                depth--;
                return list;
            }
            if (c != ',') {
                pos--;
                throw error("expected ',' or ']'");
            }
        }
    }

    private String readString() {
        pos++;
        StringBuilder out = new StringBuilder();
        while (true) {
            char c = next("closing '\"'");
            if (c == '"') {
                return out.toString();
            }
            if (c < 0x20) {
                pos--;
                throw error("control character " + quoteChar(c) + " in string");
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char e = next("escape character");
            switch (e) {
                case '"':
                case '\\':
                case '/':
                    out.append(e);
                    break;
                case 'b':
                    out.append('\b');
                    break;
                case 'f':
                    out.append('\f');
                    break;
                case 'n':
                    out.append('\n');
                    break;
                case 'r':
                    out.append('\r');
                    break;
                case 't':
                    out.append('\t');
                    break;
                case 'u':
                    out.append(readHex4());
                    break;
                default:
                    pos--;
                    throw error("bad escape \\" + e);
            }
        }
    }

    private char readHex4() {
        if (pos + 4 > text.length()) {
            throw error("truncated \\u escape");
        }
        int value = 0;
        for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(pos + i), 16);
            if (digit < 0) {
                throw error("bad hex digit in \\u escape");
            }
            value = value * 16 + digit;
        }
        pos += 4;
        return (char) value;
    }

    private Object readNumber() {
        int start = pos;
        if (peek() == '-') {
            pos++;
        }
        if (peek() == '0') {
            pos++;
        } else if (!digits()) {
            throw error("expected a digit");
        }
        boolean integer = true;
        if (peek() == '.') {
            pos++;
            integer = false;
            if (!digits()) {
                throw error("expected a digit after '.'");
            }
        }
        if (peek() == 'e' || peek() == 'E') {
            pos++;
            integer = false;
            if (peek() == '+' || peek() == '-') {
                pos++;
            }
            if (!digits()) {
                throw error("expected a digit in the exponent");
            }
        }
        String number = text.substring(start, pos);
        if (!integer) {
            return Double.valueOf(number);
        }
        try {
            return Long.valueOf(number);
        } catch (NumberFormatException tooBig) {
            return new BigDecimal(number);
        }
    }

    private boolean digits() {
        int start = pos;
        while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
            pos++;
        }
        return pos > start;
    }

    private Object readLiteral(String word, Object value) {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected character " + quoteChar(text.charAt(pos)));
        }
        pos += word.length();
        return value;
    }

    private void enter() {
        if (++depth > MAX_DEPTH) {
            throw error("nesting deeper than " + MAX_DEPTH);
        }
    }

    private void skipWhitespace() {
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    private char peek() {
        return pos < text.length() ? text.charAt(pos) : '\0';
    }

    private char next(String expected) {
        if (pos >= text.length()) {
            throw error("unexpected end of input, expected " + expected);
        }
        return text.charAt(pos++);
    }

    private void expect(char c) {
        if (peek() != c) {
            throw error("expected '" + c + "'");
        }
        pos++;
    }

    private JsonException error(String what) {
        return new JsonException("malformed JSON: " + what + " at position " + pos);
    }

    private static String quoteChar(char c) {
        return c >= 0x20 && c < 0x7f ? "'" + c + "'" : String.format("U+%04X", (int) c);
    }

    private static String describe(Object value) {
        return value == null ? "null" : value.getClass().getSimpleName();
    }

    private static void writeValue(StringBuilder out, Object value, int depth) {
        if (depth > MAX_DEPTH) {
            throw new JsonException("cannot write JSON nested deeper than " + MAX_DEPTH);
        }
        if (value == null) {
            out.append("null");
        } else if (value instanceof String || value instanceof Character) {
            writeString(out, value.toString());
        } else if (value instanceof Boolean) {
            out.append(value.toString());
        } else if (value instanceof Double || value instanceof Float) {
            double d = ((Number) value).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                throw new JsonException("JSON has no form for the number " + d);
            }
            out.append(value.toString());
        } else if (value instanceof BigDecimal) {
            out.append(((BigDecimal) value).toString());
        } else if (value instanceof Number) {
            out.append(value.toString());
        } else if (value instanceof Map) {
            writeObject(out, (Map<?, ?>) value, depth);
        } else if (value instanceof Collection) {
            writeArray(out, ((Collection<?>) value).toArray(), depth);
        } else if (value instanceof Object[]) {
            writeArray(out, (Object[]) value, depth);
        } else {
            throw new JsonException("JSON has no form for " + value.getClass().getName());
        }
    }

    private static void writeObject(StringBuilder out, Map<?, ?> map, int depth) {
        out.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> entry : map.entrySet()) {
            if (!(entry.getKey() instanceof String)) {
                throw new JsonException("JSON object keys must be strings, got " + describe(entry.getKey()));
            }
            if (!first) {
                out.append(',');
            }
            first = false;
            writeString(out, (String) entry.getKey());
            out.append(':');
            writeValue(out, entry.getValue(), depth + 1);
        }
        out.append('}');
    }

    private static void writeArray(StringBuilder out, Object[] items, int depth) {
        out.append('[');
        for (int i = 0; i < items.length; i++) {
            if (i > 0) {
                out.append(',');
            }
            writeValue(out, items[i], depth + 1);
        }
        out.append(']');
    }

    private static void writeString(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == '\u2028' || c == '\u2029') {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
