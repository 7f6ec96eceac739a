package org.fencing.guard;

import java.util.List;

/** A stream's verdicts (ADMITTED, INVALID_TOKEN, STALE_TOKEN or TOKEN_REUSED each) and the mark after it. */
public record StreamOutcome(List<Verdict> verdicts, long highWater) {}
