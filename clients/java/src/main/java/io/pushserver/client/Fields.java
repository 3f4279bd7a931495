package io.pushserver.client;

import java.net.ProtocolException;
import java.util.Map;

/** Typed access to the fields of a server answer, failing with a protocol error when one is off. */
final class Fields {
    private Fields() {}

    static String string(Map<String, Object> object, String name) throws ProtocolException {
        Object value = object.get(name);
        if (!(value instanceof String)) {
            throw new ProtocolException("field '" + name + "' is not a string in " + Json.write(object));
        }
        return (String) value;
    }

    static Number number(Map<String, Object> object, String name) throws ProtocolException {
        Object value = object.get(name);
        if (!(value instanceof Number)) {
            throw new ProtocolException("field '" + name + "' is not a number in " + Json.write(object));
        }
        return (Number) value;
    }
}
