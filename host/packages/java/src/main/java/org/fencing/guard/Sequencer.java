package org.fencing.guard;

import java.util.Objects;
import java.util.OptionalLong;

/** What a writer presents: the lock, its token, and optionally its write's sequence within that token. */
public record Sequencer(String lock, long token, OptionalLong sequence) {
    public Sequencer {
        Objects.requireNonNull(lock, "lock");
        U64.check(token, "token");
        U64.check(sequence, "sequence");
    }

    /** A sequencer with no sequence. */
    public Sequencer(String lock, long token) {
        this(lock, token, OptionalLong.empty());
    }
}
