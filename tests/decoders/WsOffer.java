import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/** The JDK's WebSocket client (java.net.http): prints each text message it receives. */
public final class WsOffer {
    public static void main(String[] args) throws Exception {
        CompletableFuture<Void> closed = new CompletableFuture<>();
        HttpClient.newHttpClient().newWebSocketBuilder().buildAsync(URI.create(args[0]),
                new WebSocket.Listener() {
                    @Override
                    public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
                        System.out.println(data);
                        ws.request(1);
                        return null;
                    }

                    @Override
                    public CompletionStage<?> onClose(WebSocket ws, int code, String reason) {
                        System.out.println("CLOSE " + code);
                        closed.complete(null);
                        return null;
                    }

                    @Override
                    public void onError(WebSocket ws, Throwable error) {
                        System.out.println("ERROR " + error);
                        closed.complete(null);
                    }
                }).join();
        closed.join();
    }
}
