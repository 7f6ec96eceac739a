package org.fencing.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The shared vectors (tests/vectors/README.md) through this package's API:
 * every case must give exactly the verdict and evidence written there. A
 * case holding a u64 at or above 2^63 cannot be asked in Java: handing it to
 * Java ({@link U64#of}) is refused ({@code number_above_signed}), never
 * wrapped. A case whose lock names the hosts' name rule refuses (the empty
 * name, edge white space, more than 256 characters, a NUL byte in a random
 * case; {@link Names}) must be refused with the rule's code, as every host
 * refuses it, instead of decided. With the system property or environment
 * variable FENCING_RANDOM_VECTORS naming a directory of `fencing check
 * --random` files, those cases run too.
 */
class VectorsTest {
    private static final ObjectMapper JSON =
            new ObjectMapper().enable(DeserializationFeature.USE_BIG_INTEGER_FOR_INTS);
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final BigInteger LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE);

    static List<JsonNode> read(Path dir) throws IOException {
        List<JsonNode> cases = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.filter(f -> f.toString().endsWith(".json")).sorted().toList()) {
                JSON.readTree(file.toFile()).get("cases").forEach(cases::add);
            }
        }
        return cases;
    }

    /** Whether any number in {@code node} is above what a long holds. */
    static boolean holdsHugeU64(JsonNode node) {
        if (node.isBigInteger() || node.isIntegralNumber()) {
            return node.bigIntegerValue().compareTo(LONG_MAX) > 0;
        }
        for (JsonNode child : node) {
            if (holdsHugeU64(child)) {
                return true;
            }
        }
        return false;
    }

    /** A u64 of the file as the long Java carries, refused above 2^63-1 ({@code U64.of}). */
    static long u64(JsonNode node) {
        return U64.of(node.bigIntegerValue(), "a vector's u64");
    }

    static OptionalLong seq(JsonNode node) {
        return node == null || node.isNull() ? OptionalLong.empty() : OptionalLong.of(u64(node));
    }

    static Fence fence(JsonNode node) {
        return node == null || node.isNull()
                ? null
                : new Fence(node.get("lock").asText(), u64(node.get("high_water")), seq(node.get("sequence")));
    }

    /** The case's lock names in the order a guard interns them: the fence's, then the presented one. */
    static List<String> lockNames(JsonNode c) {
        List<String> names = new ArrayList<>();
        JsonNode f = c.get("fence");
        if (f != null && !f.isNull()) {
            names.add(f.get("lock").asText());
        }
        if (c.has("sequencer")) {
            names.add(c.get("sequencer").get("lock").asText());
        } else if (c.get("kind").asText().equals("batch")) {
            names.add(c.get("lock").asText());
        }
        return names;
    }

    /** The code of the first of the case's lock names the name rule refuses, or null. */
    static String refusedName(JsonNode c) {
        for (String name : lockNames(c)) {
            try {
                Names.check(name);
            } catch (InvalidArgumentException e) {
                return e.code();
            }
        }
        return null;
    }

    static Policy policy(JsonNode c) {
        return switch (c.get("policy").asText()) {
            case "non_decreasing" -> Policy.NON_DECREASING;
            case "strictly_increasing" -> Policy.STRICTLY_INCREASING;
            default -> throw new IllegalStateException("unknown policy in " + c.get("name"));
        };
    }

    static JsonNode num(long v) {
        return NODES.numberNode(BigInteger.valueOf(v));
    }

    static JsonNode seqNode(OptionalLong s) {
        return s.isPresent() ? num(s.getAsLong()) : NODES.nullNode();
    }

    /** {@code d} in the vectors' vocabulary. */
    static ObjectNode verdict(Decision d) {
        ObjectNode out = NODES.objectNode();
        out.put("verdict", d.reason());
        if (d instanceof Decision.Admitted a) {
            out.set("high_water", num(a.highWater()));
            out.set("sequence", seqNode(a.sequence()));
            out.put("new_term", a.newTerm());
        } else if (d instanceof Decision.StaleToken s) {
            out.set("presented", num(s.presented()));
            out.set("high_water", num(s.highWater()));
        } else if (d instanceof Decision.TokenReused s) {
            out.set("presented", num(s.presented()));
            out.set("high_water", num(s.highWater()));
        } else if (d instanceof Decision.SequenceRegressed s) {
            out.set("token", num(s.token()));
            out.set("presented", seqNode(s.presented()));
            out.set("last", num(s.last()));
        }
        return out;
    }

    /** The expected value with the optional fields the vectors may leave out filled in. */
    static JsonNode normalised(JsonNode node) {
        JsonNode copy = node.deepCopy();
        fill(copy);
        return copy;
    }

    private static void fill(JsonNode node) {
        if (node instanceof ObjectNode o && o.has("verdict")) {
            String v = o.get("verdict").asText();
            if (v.equals("admitted") && !o.has("sequence")) {
                o.putNull("sequence");
            }
            if (v.equals("sequence_regressed") && !o.has("presented")) {
                o.putNull("presented");
            }
        }
        node.forEach(VectorsTest::fill);
    }

    static JsonNode run(Guard g, JsonNode c) {
        Policy p = policy(c);
        switch (c.get("kind").asText()) {
            case "admit" -> {
                JsonNode s = c.get("sequencer");
                Sequencer presented = new Sequencer(s.get("lock").asText(), u64(s.get("token")), seq(s.get("sequence")));
                return verdict(g.admit(fence(c.get("fence")), presented, p));
            }
            case "batch" -> {
                List<Write> writes = new ArrayList<>();
                c.get("writes").forEach(w -> writes.add(new Write(u64(w.get("token")), seq(w.get("sequence")))));
                BatchOutcome out = g.admitBatch(fence(c.get("fence")), c.get("lock").asText(), writes, p);
                ObjectNode result = NODES.objectNode();
                out.decisions().forEach(d -> result.withArray("verdicts").add(verdict(d)));
                if (out.decisions().isEmpty()) {
                    result.putArray("verdicts");
                }
                result.set("fence", out.fence()
                        .<JsonNode>map(f -> NODES.objectNode().<ObjectNode>set("high_water", num(f.highWater()))
                                .set("sequence", seqNode(f.sequence())))
                        .orElse(NODES.nullNode()));
                return result;
            }
            case "stream" -> {
                JsonNode ts = c.get("tokens");
                long[] tokens = new long[ts.size()];
                for (int i = 0; i < tokens.length; i++) {
                    tokens[i] = u64(ts.get(i));
                }
                StreamOutcome out = g.admitStream(u64(c.get("high_water")), tokens, p);
                ObjectNode result = NODES.objectNode();
                result.putArray("verdicts");
                out.verdicts().forEach(v -> result.withArray("verdicts").add(v.reason()));
                result.set("high_water", num(out.highWater()));
                return result;
            }
            default -> throw new IllegalStateException("unknown kind in " + c.get("name"));
        }
    }

    /** Runs every case: decided ones must match, ones Java cannot carry must be refused. */
    static void checkAll(List<JsonNode> cases) {
        int decided = 0;
        int refused = 0;
        int refusedNames = 0;
        List<String> failures = new ArrayList<>();
        try (Guard g = new Guard()) {
            for (JsonNode c : cases) {
                String name = c.get("name").asText();
                if (holdsHugeU64(c.get("fence") == null ? NODES.nullNode() : c.get("fence"))
                        || holdsHugeU64(c.has("sequencer") ? c.get("sequencer") : NODES.nullNode())
                        || holdsHugeU64(c.has("writes") ? c.get("writes") : NODES.nullNode())
                        || holdsHugeU64(c.has("tokens") ? c.get("tokens") : NODES.nullNode())
                        || holdsHugeU64(c.has("high_water") ? c.get("high_water") : NODES.nullNode())) {
                    InvalidArgumentException e = assertThrows(
                            InvalidArgumentException.class, () -> run(g, c), name + ": a u64 above 2^63-1 must be refused");
                    assertEquals("number_above_signed", e.code(), name);
                    refused++;
                    continue;
                }
                String code = refusedName(c);
                if (code != null) {
                    InvalidArgumentException e = assertThrows(
                            InvalidArgumentException.class, () -> run(g, c), name + ": its lock name must be refused");
                    if (!e.code().equals(code) && failures.size() < 10) {
                        failures.add(name + ": refused with " + e.code() + ", want " + code);
                    }
                    refusedNames++;
                    continue;
                }
                JsonNode got = run(g, c);
                JsonNode want = normalised(c.get("expect"));
                if (!got.equals(want) && failures.size() < 10) {
                    failures.add(name + ": got " + got + ", want " + want);
                }
                if (got.equals(want)) {
                    decided++;
                }
            }
        }
        System.out.printf("%d cases: %d decided as expected, %d refused as beyond a long, %d refused by the name rule,"
                + " %d failed%n", cases.size(), decided, refused, refusedNames, cases.size() - decided - refused - refusedNames);
        assertEquals(List.of(), failures);
        assertEquals(cases.size(), decided + refused + refusedNames);
    }

    @Test
    void sharedVectors() throws IOException {
        List<JsonNode> cases = read(Path.of("..", "..", "..", "tests", "vectors"));
        assertTrue(cases.size() >= 100, cases.size() + " shared cases");
        checkAll(cases);
    }

    @Test
    void randomCasesAgreeWithTheNativeRules() throws IOException {
        String dir = System.getProperty("FENCING_RANDOM_VECTORS", System.getenv("FENCING_RANDOM_VECTORS"));
        Assumptions.assumeTrue(dir != null && !dir.isEmpty(), "FENCING_RANDOM_VECTORS is not set");
        checkAll(read(Path.of(dir)));
    }
}
