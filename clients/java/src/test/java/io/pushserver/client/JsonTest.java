package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class JsonTest {
    @Test
    void readsEveryKindOfValue() {
        Map<String, Object> obj = Json.parseObject(
                " {\"s\": \"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\", \"i\": -17, \"f\": 1.5e3, \"t\": true,"
                        + " \"n\": null, \"a\": [1, [], {}], \"big\": 123456789012345678901234567890}\n");
        assertEquals("a\"b\\c/\né\uD83D\uDE00", obj.get("s"));
        assertEquals(-17L, obj.get("i"));
        assertEquals(1500.0, obj.get("f"));
        assertEquals(Boolean.TRUE, obj.get("t"));
        assertTrue(obj.containsKey("n") && obj.get("n") == null);
        assertEquals(Arrays.asList(1L, new ArrayList<Object>(), new LinkedHashMap<String, Object>()), obj.get("a"));
        assertEquals(new BigDecimal("123456789012345678901234567890"), obj.get("big"));
        assertEquals(Arrays.asList("s", "i", "f", "t", "n", "a", "big"), new ArrayList<String>(obj.keySet()));
    }

    @Test
    void roundTripsWhatItWrites() {
        Map<String, Object> value = new LinkedHashMap<String, Object>();
        value.put("text", "quote \" backslash \\ tab \t nl \n ctrl \u0001 sep \u2028 emoji \uD83D\uDE00 é");
        value.put("long", Long.MAX_VALUE);
        value.put("neg", -1L);
        value.put("double", 0.1);
        value.put("exp", 6.02e23);
        value.put("bool", false);
        value.put("null", null);
        value.put("list", Arrays.<Object>asList(1L, "two", Arrays.asList(3.5), new LinkedHashMap<String, Object>()));
        String json = Json.write(value);
        assertEquals(value, Json.parse(json));
        assertEquals(json, Json.write(Json.parse(json)));
    }

    @Test
    void writesCompactJson() {
        Map<String, Object> value = new LinkedHashMap<String, Object>();
        value.put("n", 1);
        value.put("a", new Object[] {"x", null, true});
        assertEquals("{\"n\":1,\"a\":[\"x\",null,true]}", Json.write(value));
        assertEquals("\"\\u0000\"", Json.write("\u0000"));
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "", "   ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "[1 2]", "01", "-", "1.", ".5",
        "1e", "+1", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12g4\"", "\"\\u12\"", "\"a\tb\"", "[1] x",
        "{\"a\":1}}", "NaN", "Infinity", "'single'", "[\"a\",]"
    })
    void rejectsMalformedInputWithPosition(String text) {
        JsonException e = assertThrows(JsonException.class, () -> Json.parse(text));
        assertTrue(e.getMessage().startsWith("malformed JSON: ") && e.getMessage().contains(" at position "),
                e.getMessage());
    }

    @Test
    void namesWhereTheErrorIs() {
        JsonException e = assertThrows(JsonException.class, () -> Json.parse("{\"a\": [1, 2,, 3]}"));
        assertEquals("malformed JSON: unexpected character ',' at position 12", e.getMessage());
    }

    @Test
    void rejectsNestingTooDeep() {
        StringBuilder deep = new StringBuilder();
        for (int i = 0; i < 10000; i++) {
            deep.append('[');
        }
        JsonException e = assertThrows(JsonException.class, () -> Json.parse(deep.toString()));
        assertTrue(e.getMessage().contains("nesting deeper than"), e.getMessage());
    }

    @Test
    void rejectsValuesWithoutAJsonForm() {
        assertThrows(JsonException.class, () -> Json.write(Double.NaN));
        assertThrows(JsonException.class, () -> Json.write(Double.POSITIVE_INFINITY));
        assertThrows(JsonException.class, () -> Json.write(new Object()));
        Map<Object, Object> badKey = new LinkedHashMap<Object, Object>();
        badKey.put(1, "x");
        assertThrows(JsonException.class, () -> Json.write(badKey));
    }

    @Test
    void parseObjectWantsAnObject() {
        JsonException e = assertThrows(JsonException.class, () -> Json.parseObject("[1]"));
        assertEquals("expected a JSON object, got ArrayList", e.getMessage());
        List<Object> nulls = new ArrayList<Object>();
        nulls.add(null);
        assertEquals(nulls, Json.parse("[null]"));
    }
}
