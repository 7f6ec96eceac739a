package org.fencing.guard;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.OptionalLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** Signed writes through {@link Guard#admitSigned}: every shared proof vector, and refused key sets. */
class SignedTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Path PROOFS = Path.of("..", "..", "..", "tests", "vectors", "proofs");

    private static Keys keys(JsonNode file, JsonNode names) {
        List<Keys.Key> keys = new ArrayList<>();
        for (JsonNode n : names) {
            JsonNode k = file.get("keys").get(n.asText());
            Keys.Algorithm alg = k.get("algorithm").asText().equals("ed25519") ? Keys.Algorithm.ED25519 : Keys.Algorithm.HMAC_SHA256;
            keys.add(new Keys.Key(k.get("id").asLong(), alg, HexFormat.of().parseHex(k.get("material").asText())));
        }
        return Keys.of(keys.toArray(Keys.Key[]::new));
    }

    private static Decision expected(JsonNode e) {
        String verdict = e.get("verdict").asText();
        return switch (verdict) {
            case "admitted" -> new Decision.Admitted(e.get("high_water").asLong(), VectorsTest.seq(e.get("sequence")), e.get("new_term").asBoolean());
            case "stale_token" -> new Decision.StaleToken(e.get("presented").asLong(), e.get("high_water").asLong());
            case "invalid_token" -> new Decision.InvalidToken();
            case "wrong_lock" -> new Decision.WrongLock();
            case "proof_unknown_key" -> new Decision.ProofRefused(verdict, OptionalLong.of(e.get("key_id").asLong()));
            default -> new Decision.ProofRefused(verdict, OptionalLong.empty());
        };
    }

    @Test
    void everyProofVector() throws IOException {
        int n = 0;
        try (Guard guard = new Guard(); Stream<Path> files = Files.list(PROOFS)) {
            for (Path path : files.filter(f -> f.toString().endsWith(".json")).sorted().toList()) {
                JsonNode file = JSON.readTree(path.toFile());
                for (JsonNode c : file.get("cases")) {
                    JsonNode f = c.get("fence");
                    Fence fence = f.isNull() ? null : new Fence(f.get("lock").asText(), f.get("high_water").asLong(), VectorsTest.seq(f.get("sequence")));
                    JsonNode s = c.get("sequencer");
                    Sequencer presented = new Sequencer(s.get("lock").asText(), s.get("token").asLong(), VectorsTest.seq(s.get("sequence")));
                    byte[] proof = HexFormat.of().parseHex(c.get("proof").get("hex").asText());
                    Decision got = guard.admitSigned(fence, presented, proof, keys(file, c.get("verifier")), Policy.NON_DECREASING);
                    assertEquals(expected(c.get("expect")), got, c.get("name").asText());
                    n++;
                }
            }
        }
        assertTrue(n >= 20, n + " cases");
    }

    @Test
    void keysTheComponentRefuses() {
        try (Guard guard = new Guard()) {
            Sequencer presented = new Sequencer("orders", 34, OptionalLong.empty());
            Keys.Key short16 = new Keys.Key(3, Keys.Algorithm.HMAC_SHA256, new byte[16]);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> guard.admitSigned(null, presented, new byte[0], Keys.of(short16), Policy.NON_DECREASING));
            assertTrue(e.getMessage().contains("key 3 is not a key of its algorithm"), e.getMessage());
            Keys.Key a = new Keys.Key(1, Keys.Algorithm.HMAC_SHA256, new byte[32]);
            e = assertThrows(IllegalArgumentException.class,
                    () -> guard.admitSigned(null, presented, new byte[0], Keys.of(a, a), Policy.NON_DECREASING));
            assertTrue(e.getMessage().contains("two keys have id 1"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> new Keys.Key(-1, Keys.Algorithm.ED25519, new byte[32]));
            assertEquals(new Decision.ProofRefused("proof_missing", OptionalLong.empty()),
                    guard.admitSigned(null, presented, new byte[0], Keys.of(a), Policy.NON_DECREASING));
        }
    }
}
