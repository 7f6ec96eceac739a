package org.fencing.guard;

import java.util.Objects;
import java.util.OptionalLong;

/**
 * What a resource stores: the lock it is bound to, the highest token admitted,
 * and the last sequence admitted under that token.
 */
public record Fence(String lock, long highWater, OptionalLong sequence) {
    public Fence {
        Objects.requireNonNull(lock, "lock");
        U64.check(highWater, "highWater");
        U64.check(sequence, "sequence");
    }

    /** A fence with no sequence. */
    public Fence(String lock, long highWater) {
        this(lock, highWater, OptionalLong.empty());
    }
}
