package org.fencing.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

class GuardTest {
    @Test
    void aPausedHoldersLateWriteIsRefusedWithItsEvidence() {
        try (Guard g = new Guard()) {
            Fence fence = new Fence("orders", 34);
            Decision late = g.admit(fence, new Sequencer("orders", 33), Policy.NON_DECREASING);
            assertEquals(new Decision.StaleToken(33, 34), late);
            assertFalse(late.admitted());
            Decision next = g.admit(fence, new Sequencer("orders", 35, OptionalLong.of(1)), Policy.NON_DECREASING);
            assertEquals(new Decision.Admitted(35, OptionalLong.of(1), true), next);
            assertInstanceOf(Decision.WrongLock.class, g.admit(fence, new Sequencer("payments", 35), Policy.NON_DECREASING));
            assertInstanceOf(Decision.InvalidToken.class, g.admit(null, new Sequencer("orders", 0), Policy.NON_DECREASING));
            assertEquals(new Decision.TokenReused(34, 34), g.admit(fence, new Sequencer("orders", 34), Policy.STRICTLY_INCREASING));
        }
    }

    @Test
    void u64AboveWhatALongHoldsIsRefusedNeverWrapped() {
        // -1L is the bit pattern of 2^64-1: read as a u64 it would beat every mark.
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new Sequencer("orders", -1));
        assertTrue(e.getMessage().contains("token"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new Fence("orders", Long.MIN_VALUE));
        assertThrows(IllegalArgumentException.class, () -> new Write(5, OptionalLong.of(-2)));
        try (Guard g = new Guard()) {
            assertThrows(IllegalArgumentException.class, () -> g.admitStream(-1, new long[] {1}, Policy.NON_DECREASING));
            assertThrows(IllegalArgumentException.class, () -> g.admitStream(1, new long[] {2, -3}, Policy.NON_DECREASING));
            // The largest a long carries works end to end.
            Decision top = g.admit(new Fence("l", Long.MAX_VALUE - 1), new Sequencer("l", Long.MAX_VALUE), Policy.STRICTLY_INCREASING);
            assertEquals(new Decision.Admitted(Long.MAX_VALUE, OptionalLong.empty(), true), top);
        }
    }

    @Test
    void namesAreUnicodeComparedAsBytes() {
        try (Guard g = new Guard()) {
            assertInstanceOf(Decision.WrongLock.class,
                    g.admit(new Fence("caf\u00e9", 2), new Sequencer("cafe\u0301", 3), Policy.NON_DECREASING));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> g.admit(null, new Sequencer("bad\ud800", 1), Policy.NON_DECREASING));
            assertTrue(e.getMessage().contains("presented.lock"), e.getMessage());
            // A name with a pair (an emoji) is fine.
            assertTrue(g.admit(null, new Sequencer("lock-\ud83d\udd12", 1), Policy.NON_DECREASING).admitted());
        }
    }

    @Test
    void aNameTheRuleRefusesIsRefusedWhereverItIsGivenEveryTime() {
        // A NUL inside a name is refused, never compared or truncated at; a refused name is never interned.
        try (Guard g = new Guard()) {
            Keys keys = Keys.of(new Keys.Key(1, Keys.Algorithm.HMAC_SHA256, new byte[32]));
            List<java.util.function.Consumer<String>> calls = List.of(
                    n -> g.admit(new Fence(n, 1), new Sequencer("a", 2), Policy.NON_DECREASING),
                    n -> g.admit(new Fence("a", 1), new Sequencer(n, 2), Policy.NON_DECREASING),
                    n -> g.admitBatch(null, n, List.of(new Write(1)), Policy.NON_DECREASING),
                    n -> g.admitSigned(null, new Sequencer(n, 1), new byte[0], keys, Policy.NON_DECREASING));
            for (int round = 0; round < 2; round++) {
                for (var call : calls) {
                    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> call.accept("a\u0000b"));
                    assertEquals("name_control", e.code());
                    assertTrue(e.getMessage().endsWith("contains control character U+0000 (name_control)"), e.getMessage());
                }
            }
            assertEquals("a b", Names.check("a b"));
            assertEquals("name_whitespace", assertThrows(InvalidArgumentException.class, () -> Names.check("\u00a0a")).code());
            assertEquals("number_negative", assertThrows(InvalidArgumentException.class, () -> new Sequencer("a", -1)).code());
        }
    }

    @Test
    void batchesAndStreamsCarryTheirFence() {
        try (Guard g = new Guard()) {
            BatchOutcome out = g.admitBatch(new Fence("q", 5), "q",
                    List.of(new Write(4), new Write(5), new Write(6, OptionalLong.of(1)), new Write(6, OptionalLong.of(1))),
                    Policy.NON_DECREASING);
            assertEquals(List.of(
                    new Decision.StaleToken(4, 5),
                    new Decision.Admitted(5, OptionalLong.empty(), false),
                    new Decision.Admitted(6, OptionalLong.of(1), true),
                    new Decision.SequenceRegressed(6, OptionalLong.of(1), 1)), out.decisions());
            assertEquals(new FenceState(6, OptionalLong.of(1)), out.fence().orElseThrow());
            StreamOutcome s = g.admitStream(7, new long[] {6, 7, 8, 0}, Policy.STRICTLY_INCREASING);
            assertEquals(List.of(Verdict.STALE_TOKEN, Verdict.TOKEN_REUSED, Verdict.ADMITTED, Verdict.INVALID_TOKEN), s.verdicts());
            assertEquals(8, s.highWater());
        }
    }

    @Test
    void manyNamesKeepInterningBounded() {
        try (Guard g = new Guard(8)) {
            for (int i = 0; i < 1000; i++) {
                String lock = "lock-" + i;
                Decision d = g.admit(new Fence(lock, 10), new Sequencer(lock, 9 + i % 3), Policy.NON_DECREASING);
                Class<?> want = i % 3 == 0 ? Decision.StaleToken.class : Decision.Admitted.class;
                assertInstanceOf(want, d, lock);
            }
        }
        assertThrows(IllegalArgumentException.class, () -> new Guard(1));
    }

    @Test
    void aGuardIsSafeForConcurrentUse() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        try (Guard g = new Guard()) {
            List<Future<?>> runs = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                String lock = "w" + w;
                runs.add(pool.submit(() -> {
                    for (long t = 1; t < 2000; t++) {
                        Decision d = g.admit(new Fence(lock, 1000), new Sequencer(lock, t), Policy.NON_DECREASING);
                        boolean ok = t < 1000 ? d instanceof Decision.StaleToken : d.admitted();
                        if (!ok) {
                            errors.add(lock + " " + t + ": " + d);
                        }
                    }
                }));
            }
            for (Future<?> r : runs) {
                r.get();
            }
        } finally {
            pool.shutdown();
        }
        assertEquals(List.of(), errors);
    }

    @Test
    void aComponentIsCheckedBeforeItRuns() {
        assertThrows(GuardException.class, () -> Guard.ofComponent(new byte[] {0, 'a', 's', 'm', 1, 0, 0, 0}));
        assertThrows(GuardException.class, () -> Guard.ofComponent(new byte[] {0, 'a', 's', 'm', 0x0d, 0, 1, 0, 1, (byte) 0xff}));
    }

    @Test
    void codesTheInputsCannotProduceFailClosed() {
        FenceState fence = new FenceState(5, OptionalLong.empty());
        assertThrows(GuardException.class, () -> Guard.decision(4, fence, 6, OptionalLong.empty()), "stale above the mark");
        assertThrows(GuardException.class, () -> Guard.decision(0, null, 5, OptionalLong.empty()), "admitted without a fence");
        assertThrows(GuardException.class, () -> Guard.decision(3, null, 5, OptionalLong.empty()), "wrong lock without a fence");
        assertThrows(GuardException.class, () -> Guard.decision(2, fence, 5, OptionalLong.empty()), "invalid with a token");
        assertThrows(GuardException.class, () -> Guard.decision(6, fence, 5, OptionalLong.empty()), "regressed without a sequence");
        assertThrows(GuardException.class, () -> Guard.decision(7, fence, 5, OptionalLong.empty()), "unknown code");
    }
}
