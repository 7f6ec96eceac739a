package org.fencing.guard;

/**
 * How a u64 of the contract travels in a Java {@code long}: as itself, from 0
 * to 2^63-1. A negative {@code long} is refused, never read as the u64 with
 * the same bits (which would let {@code -1L} stand for 2^64-1 and win every
 * comparison). Stores that hold 2^63 and above cannot be served from Java.
 */
public final class U64 {
    private U64() {}

    /** The largest token, sequence or mark this package carries. */
    public static final long MAX = Long.MAX_VALUE;

    /**
     * {@code value}, when it is a u64 this package can carry.
     *
     * @throws IllegalArgumentException naming {@code field} when it is negative
     */
    public static long check(long value, String field) {
        if (value < 0) {
            throw new IllegalArgumentException(field + " is " + value + ": tokens, sequences and marks are u64 carried in a"
                    + " long, so 0 to 2^63-1; a negative value is refused, not read as a value above 2^63");
        }
        return value;
    }

    /**
     * {@code value}, non-null and holding a u64 this package can carry when present.
     *
     * @throws IllegalArgumentException naming {@code field} when it holds a negative value
     */
    public static java.util.OptionalLong check(java.util.OptionalLong value, String field) {
        java.util.Objects.requireNonNull(value, field);
        if (value.isPresent()) {
            check(value.getAsLong(), field);
        }
        return value;
    }
}
