package org.fencing.guard;

/** How a token equal to the high-water mark is treated (the WIT policy; the ordinal is its case index). */
public enum Policy {
    /** The holder of the current token may write again. */
    NON_DECREASING,
    /** Each token writes once. */
    STRICTLY_INCREASING
}
