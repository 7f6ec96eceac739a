package org.fencing.guard;

import java.util.OptionalLong;

/** The numeric part of a fence after a batch (the lock to store is the batch's). */
public record FenceState(long highWater, OptionalLong sequence) {}
