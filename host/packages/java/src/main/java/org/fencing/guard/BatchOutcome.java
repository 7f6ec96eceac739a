package org.fencing.guard;

import java.util.List;
import java.util.Optional;

/** A batch's decisions, in order, and the fence after it (empty when there was none and nothing was admitted). */
public record BatchOutcome(List<Decision> decisions, Optional<FenceState> fence) {}
