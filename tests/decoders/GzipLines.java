import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.zip.GZIPInputStream;

/**
 * The JDK's own decoder on a gzip-encoded response: GZIPInputStream over the socket's stream,
 * as on Android. Prints each complete line of the decoded body the moment read() returns it,
 * then END when the body ended cleanly or ERROR and the exception.
 */
public final class GzipLines {
    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        HttpURLConnection conn = (HttpURLConnection) new URL(args[0]).openConnection();
        conn.setRequestProperty("Accept-Encoding", "gzip");
        conn.setRequestProperty("Accept", args[1]);
        try {
            InputStream in = conn.getInputStream();
            if ("gzip".equals(conn.getContentEncoding())) {
                in = new GZIPInputStream(in);
            }
            StringBuilder line = new StringBuilder();
            byte[] buf = new byte[8192];
            for (int n; (n = in.read(buf)) != -1; ) {
                line.append(new String(buf, 0, n, StandardCharsets.UTF_8));
                for (int end; (end = line.indexOf("\n")) >= 0; ) {
                    out.println(line.substring(0, end));
                    line.delete(0, end + 1);
                }
            }
            out.println("END");
        } catch (IOException e) {
            out.println("ERROR " + e);
        }
    }
}
