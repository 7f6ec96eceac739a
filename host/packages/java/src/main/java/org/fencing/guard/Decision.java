package org.fencing.guard;

import java.util.OptionalLong;

/** One write's verdict with its evidence. Refusals are values of this type, never exceptions. */
public sealed interface Decision
        permits Decision.Admitted,
                Decision.InvalidToken,
                Decision.WrongLock,
                Decision.StaleToken,
                Decision.TokenReused,
                Decision.SequenceRegressed,
                Decision.ProofRefused {

    /** Whether the write may be applied. */
    default boolean admitted() {
        return this instanceof Admitted;
    }

    /** The reason name ({@code admitted}, {@code stale_token}, ...). */
    String reason();

    /** Admitted: store {@code highWater} and {@code sequence} with the presented lock; {@code newTerm} when the token rose. */
    record Admitted(long highWater, OptionalLong sequence, boolean newTerm) implements Decision {
        public String reason() {
            return "admitted";
        }
    }

    /** Token 0, which no lock service issues. */
    record InvalidToken() implements Decision {
        public String reason() {
            return Verdict.INVALID_TOKEN.reason();
        }
    }

    /** The resource's fence is bound to another lock. */
    record WrongLock() implements Decision {
        public String reason() {
            return Verdict.WRONG_LOCK.reason();
        }
    }

    /** A newer token has written the resource. */
    record StaleToken(long presented, long highWater) implements Decision {
        public String reason() {
            return Verdict.STALE_TOKEN.reason();
        }
    }

    /** The mark's own token again, under {@link Policy#STRICTLY_INCREASING}. */
    record TokenReused(long presented, long highWater) implements Decision {
        public String reason() {
            return Verdict.TOKEN_REUSED.reason();
        }
    }

    /**
     * A signed write ({@link Guard#admitSigned}) whose proof does not show the lock service granted
     * its token for its lock: {@code proof_missing}, {@code proof_malformed}, {@code
     * proof_unknown_key} (with {@code keyId}, the key the proof names) or {@code proof_bad}.
     */
    record ProofRefused(String reason, OptionalLong keyId) implements Decision {}

    /** The mark's token with a sequence not above the last one admitted. */
    record SequenceRegressed(long token, OptionalLong presented, long last) implements Decision {
        public String reason() {
            return Verdict.SEQUENCE_REGRESSED.reason();
        }
    }
}
