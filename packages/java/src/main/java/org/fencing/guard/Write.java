package org.fencing.guard;

import java.util.Objects;
import java.util.OptionalLong;

/** One write of a batch (the lock is the batch's). */
public record Write(long token, OptionalLong sequence) {
    public Write {
        U64.check(token, "token");
        Objects.requireNonNull(sequence, "sequence");
        if (sequence.isPresent()) {
            U64.check(sequence.getAsLong(), "sequence");
        }
    }

    /** A write with no sequence. */
    public Write(long token) {
        this(token, OptionalLong.empty());
    }
}
