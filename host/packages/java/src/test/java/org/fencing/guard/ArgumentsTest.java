package org.fencing.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * The shared argument vectors (tests/vectors/arguments, format in tests/vectors/README.md)
 * through the package's own entry points: it must refuse exactly the cases the file refuses,
 * with an {@link InvalidArgumentException} (an {@link IllegalArgumentException}) whose code is
 * the rule's (and ends its message), and take every other one.
 *
 * <p>What the package takes, and so which cases run:
 * <ul>
 *   <li>{@code name}: the {@code text} cases, as the lock of a fence, of a sequencer, of a
 *       batch and of a signed write, and through {@link Names#check}. The {@code bytes_hex}
 *       cases are skipped: a name is a {@code String}, never bytes;
 *   <li>{@code policy}: skipped: a policy is a {@link Policy} constant, never text;
 *   <li>{@code number}: skipped: a token is a {@code long}, never text;
 *   <li>{@code from_signed}: the value as a {@code long} token, sequence and mark
 *       ({@code number_negative} below 0);
 *   <li>{@code to_signed}: the value handed to Java by {@link U64#of} ({@code
 *       number_above_signed} above 2^63-1), then used as a token;
 *   <li>{@code proof}: proofs are bytes. A case whose text is hex runs as its bytes (ok, or
 *       {@code proof_too_long} past 256 bytes); {@code proof_not_hex} cases are about text
 *       and are skipped.
 * </ul>
 */
class ArgumentsTest {
    private static final ObjectMapper JSON =
            new ObjectMapper().enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS);
    private static final Path VECTORS = Path.of("..", "..", "..", "tests", "vectors");
    private static final Keys KEYS = Keys.of(new Keys.Key(1, Keys.Algorithm.HMAC_SHA256, new byte[32]));

    private static String text(JsonNode c) {
        return c.get("text").asText().repeat(c.has("repeat") ? c.get("repeat").asInt() : 1);
    }

    /** Why the package does not take {@code c}, or null. */
    private static String skipped(JsonNode c) {
        String expect = c.get("expect").asText();
        return switch (c.get("kind").asText()) {
            case "name" -> c.has("bytes_hex") ? "a name is a String, never bytes" : null;
            case "from_signed", "to_signed" -> null;
            case "proof" -> expect.equals("proof_not_hex") ? "a proof is bytes, never hex" : null;
            case "policy" -> "a policy is a Policy constant, never text";
            default -> "a token is a long, never text";
        };
    }

    private static void refused(String name, String code, Executable call) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, call, name);
        assertEquals(code, e.code(), name + ": " + e.getMessage());
        assertTrue(e.getMessage().endsWith("(" + code + ")"), name + ": " + e.getMessage());
    }

    /** Runs every entry point: each must take the value, or refuse it with {@code expect}. */
    private static void each(String name, String expect, List<Executable> calls) throws Throwable {
        for (Executable call : calls) {
            if (expect.equals("ok")) {
                call.execute();
            } else {
                refused(name, expect, call);
            }
        }
    }

    private static void runName(Guard g, JsonNode c, String name, String expect) throws Throwable {
        String n = text(c);
        each(name, expect, List.of(
                () -> Names.check(n),
                () -> g.admit(null, new Sequencer(n, 1), Policy.NON_DECREASING),
                () -> g.admit(new Fence(n, 1), new Sequencer("other", 2), Policy.NON_DECREASING),
                () -> g.admitBatch(new Fence("other", 1), n, List.of(new Write(2)), Policy.NON_DECREASING),
                () -> g.admitSigned(null, new Sequencer(n, 1), new byte[0], KEYS, Policy.NON_DECREASING)));
        if (expect.equals("ok")) {
            assertEquals(new Decision.Admitted(1, OptionalLong.empty(), false),
                    g.admit(new Fence(n, 1), new Sequencer(n, 1), Policy.NON_DECREASING), name);
        }
    }

    private static void runToken(Guard g, String name, String expect, long v) throws Throwable {
        each(name, expect, List.of(
                () -> new Sequencer("l", v),
                () -> new Sequencer("l", 1, OptionalLong.of(v)),
                () -> new Fence("l", v),
                () -> new Write(v),
                () -> g.admitStream(v, new long[] {1}, Policy.NON_DECREASING),
                () -> g.admitStream(1, new long[] {v}, Policy.NON_DECREASING)));
        if (expect.equals("ok")) {
            Decision d = g.admit(null, new Sequencer("l", v), Policy.NON_DECREASING);
            assertEquals(v == 0 ? new Decision.InvalidToken() : new Decision.Admitted(v, OptionalLong.empty(), true), d, name);
        }
    }

    @Test
    void everyArgumentVectorThePackageTakes() throws Throwable {
        JsonNode file = JSON.readTree(VECTORS.resolve("arguments").resolve("arguments.json").toFile());
        int ran = 0;
        Map<String, Integer> skips = new LinkedHashMap<>();
        List<String> kindsRan = new ArrayList<>();
        try (Guard g = new Guard()) { // a refused name is never interned: each entry point checks it again
            for (JsonNode c : file.get("cases")) {
                String name = c.get("name").asText();
                String kind = c.get("kind").asText();
                String expect = c.get("expect").asText();
                if (skipped(c) != null) {
                    skips.merge(kind, 1, Integer::sum);
                    continue;
                }
                switch (kind) {
                    case "name" -> runName(g, c, name, expect);
                    case "from_signed" -> runToken(g, name, expect, c.get("value").bigIntegerValue().longValueExact());
                    case "to_signed" -> {
                        BigInteger value = c.get("value").bigIntegerValue();
                        if (expect.equals("ok")) {
                            runToken(g, name, expect, U64.of(value, "token"));
                        } else {
                            refused(name, expect, () -> U64.of(value, "token"));
                        }
                    }
                    case "proof" -> {
                        byte[] proof = HexFormat.of().parseHex(text(c));
                        Executable call = () -> g.admitSigned(null, new Sequencer("l", 1), proof, KEYS, Policy.NON_DECREASING);
                        if (expect.equals("ok")) {
                            // Taken: the proof is the component's to judge (empty: missing; these bytes: not a proof).
                            Decision d = g.admitSigned(null, new Sequencer("l", 1), proof, KEYS, Policy.NON_DECREASING);
                            assertTrue(d instanceof Decision.ProofRefused, name + ": " + d);
                        } else {
                            refused(name, expect, call);
                        }
                    }
                    default -> throw new IllegalStateException("unknown kind " + kind);
                }
                kindsRan.add(kind + ":" + (expect.equals("ok") ? "ok" : "refused"));
                ran++;
            }
        }
        System.out.printf("argument vectors: %d passed, skipped %s, 0 failed%n", ran, skips);
        for (String kind : List.of("name", "from_signed", "to_signed", "proof")) {
            assertTrue(kindsRan.contains(kind + ":ok") && kindsRan.contains(kind + ":refused"), kind);
        }
        assertTrue(ran >= 34, ran + " cases ran");
    }
}
