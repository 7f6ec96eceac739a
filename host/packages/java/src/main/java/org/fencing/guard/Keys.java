package org.fencing.guard;

import java.util.List;
import java.util.Objects;

/**
 * The keys {@link Guard#admitSigned} checks proofs with: 1 to 64, ids distinct. The component
 * checks them when a guard first uses them (a bad set throws {@link IllegalArgumentException}
 * there). Rotating keys is making new {@code Keys}.
 */
public final class Keys {
    /** How a key checks proofs (the WIT {@code key-algorithm}; the ordinal is its case). */
    public enum Algorithm {
        /** The lock service's 32-byte Ed25519 public key: a verifier cannot make proofs. */
        ED25519,
        /** A shared HMAC-SHA256 secret of 32 to 64 bytes: whoever holds it can make proofs. */
        HMAC_SHA256
    }

    /** One key, named in proofs by {@code id} (0 to 2^32-1). */
    public record Key(long id, Algorithm algorithm, byte[] material) {
        public Key {
            if (id < 0 || id > 0xffffffffL) {
                throw new IllegalArgumentException("id is " + id + ": keys are named 0 to 4294967295");
            }
            Objects.requireNonNull(algorithm, "algorithm");
            material = Objects.requireNonNull(material, "material").clone();
        }

        @Override
        public byte[] material() {
            return material.clone();
        }
    }

    final List<Key> keys;

    private Keys(List<Key> keys) {
        this.keys = keys;
    }

    /** The keys, copied. */
    public static Keys of(Key... keys) {
        for (int i = 0; i < keys.length; i++) {
            Objects.requireNonNull(keys[i], "keys[" + i + "]");
        }
        return new Keys(List.of(keys));
    }
}
