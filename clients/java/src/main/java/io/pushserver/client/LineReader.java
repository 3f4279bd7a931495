package io.pushserver.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.ProtocolException;

/**
 * Splits a byte stream into UTF-8 lines as bytes arrive, without waiting to fill a buffer, so a
 * held-open stream delivers each line at once.
 */
final class LineReader {
    private static final int MAX_LINE = 16 * 1024 * 1024;

    private final InputStream in;
    private byte[] buf = new byte[8192];
    private int start;
    private int end;

    LineReader(InputStream in) {
        this.in = in;
    }

    /** The next line without its {@code \n} (or {@code \r\n}); null at the end of the stream. */
    String readLine() throws IOException {
        int checked = 0; // bytes after start known to hold no newline
        while (true) {
            for (int i = start + checked; i < end; i++) {
                if (buf[i] == '\n') {
                    int lineEnd = i > start && buf[i - 1] == '\r' ? i - 1 : i;
                    String line = new String(buf, start, lineEnd - start, Http.UTF_8);
                    start = i + 1;
                    return line;
                }
            }
            checked = end - start;
            if (!fill()) {
                return null;
            }
        }
    }

    private boolean fill() throws IOException {
        if (start > 0) {
            System.arraycopy(buf, start, buf, 0, end - start);
            end -= start;
            start = 0;
        }
        if (end == buf.length) {
            if (buf.length >= MAX_LINE) {
                throw new ProtocolException("line longer than " + MAX_LINE + " bytes");
            }
            byte[] bigger = new byte[buf.length * 2];
            System.arraycopy(buf, 0, bigger, 0, end);
            buf = bigger;
        }
        int n = in.read(buf, end, buf.length - end);
        if (n < 0) {
            return false;
        }
        end += n;
        return true;
    }
}
