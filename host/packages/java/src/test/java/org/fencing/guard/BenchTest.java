package org.fencing.guard;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The per-call cost through the module, a simple stated benchmark (not JMH):
 * after 200,000 warm-up calls, 7 rounds of timed calls each, the median
 * printed. Tagged {@code bench}, so `mvn test` leaves it out;
 * `mvn test -Dgroups=bench -Dfencing.excluded.groups=none` runs it. It asserts nothing about time.
 */
@Tag("bench")
class BenchTest {
    private static double medianNanos(int calls, Runnable call) {
        for (int i = 0; i < 200_000; i++) {
            call.run();
        }
        double[] rounds = new double[7];
        for (int r = 0; r < rounds.length; r++) {
            long start = System.nanoTime();
            for (int i = 0; i < calls; i++) {
                call.run();
            }
            rounds[r] = (System.nanoTime() - start) / (double) calls;
        }
        Arrays.sort(rounds);
        return rounds[rounds.length / 2];
    }

    @Test
    void perCall() {
        try (Guard g = new Guard()) {
            Fence fence = new Fence("orders", 34);
            Sequencer admitted = new Sequencer("orders", 34);
            Sequencer refused = new Sequencer("orders", 33);
            List<Write> writes = new ArrayList<>();
            long[] tokens = new long[1024];
            for (int i = 0; i < 1024; i++) {
                writes.add(new Write(100 + i / 4));
                tokens[i] = 100 + i / 4;
            }
            Fence batchFence = new Fence("orders", 100);
            System.out.printf("java: admit admitted %.0f ns/call%n",
                    medianNanos(200_000, () -> g.admit(fence, admitted, Policy.NON_DECREASING)));
            System.out.printf("java: admit refused %.0f ns/call%n",
                    medianNanos(200_000, () -> g.admit(fence, refused, Policy.NON_DECREASING)));
            System.out.printf("java: batch of 1,024 %.1f ns/write%n",
                    medianNanos(500, () -> g.admitBatch(batchFence, "orders", writes, Policy.NON_DECREASING)) / 1024);
            System.out.printf("java: stream of 1,024 %.1f ns/token%n",
                    medianNanos(2_000, () -> g.admitStream(100, tokens, Policy.NON_DECREASING)) / 1024);
        }
    }
}
