package org.fencing.guard;

import java.util.OptionalLong;

/** One write of a batch (the lock is the batch's). */
public record Write(long token, OptionalLong sequence) {
    public Write {
        U64.check(token, "token");
        U64.check(sequence, "sequence");
    }

    /** A write with no sequence. */
    public Write(long token) {
        this(token, OptionalLong.empty());
    }
}
