package io.pushserver.client;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** A real pushserver process on a loopback port, started with the Python named by PUSHSERVER_PYTHON. */
final class TestServer implements AutoCloseable {
    private static final Pattern READY = Pattern.compile("pushserver listening on (http://127\\.0\\.0\\.1:(\\d+))");
    private static final long START_TIMEOUT_SECONDS = 60;
    /** Server logs (stderr) of this run only, kept for reading after a failure. */
    private static final File LOGS = freshLogDirectory();

    final URI url;
    final int port;
    private final Process process;

    private TestServer(Process process, URI url, int port) {
        this.process = process;
        this.url = url;
        this.port = port;
    }

    /** Starts a server on an ephemeral port with extra command-line flags. */
    static TestServer start(String... flags) throws Exception {
        return start(0, flags);
    }

    /** Starts a server on a given port (0 = ephemeral), e.g. to restart one where clients expect it. */
    static TestServer start(int port, String... flags) throws Exception {
        List<String> command = new ArrayList<>(Arrays.asList(
                python(), "-m", "pushserver", "--host", "127.0.0.1", "--port", Integer.toString(port)));
        command.addAll(Arrays.asList(flags));
        File log = File.createTempFile("server-", ".log", LOGS);
        Process process = new ProcessBuilder(command)
                .directory(repositoryRoot())
                .redirectError(log)
                .start();
        Runtime.getRuntime().addShutdownHook(new Thread(process::destroyForcibly)); // a crashed test run
        CompletableFuture<Matcher> ready = new CompletableFuture<>();
        Thread reader = new Thread(() -> readStdout(process, ready), "pushserver-stdout");
        reader.setDaemon(true);
        reader.start();
        try {
            Matcher m = ready.get(START_TIMEOUT_SECONDS, TimeUnit.SECONDS);
            return new TestServer(process, URI.create(m.group(1)), Integer.parseInt(m.group(2)));
        } catch (TimeoutException | java.util.concurrent.ExecutionException e) {
            process.destroyForcibly();
            throw new IllegalStateException("pushserver did not start: " + command + "\n" + logText(log), e);
        }
    }

    private static File freshLogDirectory() {
        File logs = new File("target/pushserver-logs");
        File[] old = logs.listFiles();
        for (File f : old == null ? new File[0] : old) {
            f.delete();
        }
        logs.mkdirs();
        return logs;
    }

    /** A port nobody listens on right now, for a server that must come back on the same port. */
    static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    private static void readStdout(Process process, CompletableFuture<Matcher> ready) {
        try (BufferedReader out = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = out.readLine()) != null; ) {
                Matcher m = READY.matcher(line);
                if (m.find()) {
                    ready.complete(m);
                }
            }
            ready.completeExceptionally(new IOException("pushserver exited before it was ready"));
        } catch (IOException e) {
            ready.completeExceptionally(e);
        }
    }

    /** PUSHSERVER_PYTHON, else the repository's .venv (the README's install gives it the
     * server's dependencies), else python3. */
    private static String python() {
        String python = System.getProperty("pushserver.python", System.getenv("PUSHSERVER_PYTHON"));
        if (python != null && !python.isEmpty()) {
            return python;
        }
        File venv = new File(repositoryRoot(), ".venv/bin/python");
        return venv.canExecute() ? venv.getPath() : "python3";
    }

    /** clients/java/../.. holds the pushserver package, so a plain python3 finds it too. */
    private static File repositoryRoot() {
        return new File(System.getProperty("user.dir")).getAbsoluteFile().getParentFile().getParentFile();
    }

    private static String logText(File log) {
        try {
            return new String(Files.readAllBytes(log.toPath()), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    /** Stops the server with SIGTERM (a graceful shutdown) and waits for it to exit. */
    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(15, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
    }
}
