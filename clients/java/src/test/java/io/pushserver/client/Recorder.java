package io.pushserver.client;

import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/** Records every callback in arrival order; a test waits on it with a deadline. */
final class Recorder implements SubscriptionListener {
    static final long WAIT_MILLIS = 30000;

    final List<Message> messages = new ArrayList<>();
    final List<Gap> gaps = new ArrayList<>();
    /** Messages as "m:channel:id", gaps as "gap:channel:from-to:reason", in arrival order. */
    final List<String> events = new ArrayList<>();
    final List<ConnectionState> states = new ArrayList<>();
    final List<Throwable> causes = new ArrayList<>();
    /** System.nanoTime() of each state change. */
    final List<Long> stateTimes = new ArrayList<>();

    @Override
    public synchronized void onMessage(Message message) {
        messages.add(message);
        events.add("m:" + message.channel() + ":" + message.id());
        notifyAll();
    }

    @Override
    public synchronized void onGap(Gap gap) {
        gaps.add(gap);
        events.add("gap:" + gap.channel() + ":" + gap.from() + "-" + gap.to() + ":" + gap.reason());
        notifyAll();
    }

    @Override
    public synchronized void onStateChange(ConnectionState state, Throwable cause) {
        states.add(state);
        causes.add(cause);
        stateTimes.add(System.nanoTime());
        notifyAll();
    }

    synchronized int messageCount() {
        return messages.size();
    }

    synchronized List<Message> messages() {
        return new ArrayList<>(messages);
    }

    synchronized void awaitMessages(int count) throws InterruptedException {
        await(r -> r.messages.size() >= count, "at least " + count + " messages");
    }

    synchronized void awaitState(ConnectionState state, int times) throws InterruptedException {
        await(r -> r.states.stream().filter(s -> s == state).count() >= times, times + " x " + state);
    }

    synchronized void await(Predicate<Recorder> condition, String what) throws InterruptedException {
        await(condition, what, WAIT_MILLIS);
    }

    synchronized void await(Predicate<Recorder> condition, String what, long waitMillis)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + waitMillis;
        while (!condition.test(this)) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                fail("timed out waiting for " + what + "; got " + messages.size() + " messages, gaps "
                        + gaps + ", states " + states + ", causes " + causes);
            }
            wait(left);
        }
    }
}
