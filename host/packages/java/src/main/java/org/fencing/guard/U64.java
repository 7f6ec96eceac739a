package org.fencing.guard;

import java.math.BigInteger;
import java.util.Objects;
import java.util.OptionalLong;

/**
 * How a u64 of the contract travels in a Java {@code long}: as itself, from 0
 * to 2^63-1, the rule every fencing host with signed 64-bit integers follows. A
 * negative {@code long} is refused ({@code number_negative}), never read as the
 * u64 with the same bits (which would let {@code -1L} stand for 2^64-1 and win
 * every comparison); a u64 above 2^63-1 cannot be handed to Java
 * ({@code number_above_signed}). Stores that hold 2^63 and above cannot be
 * served from Java.
 */
public final class U64 {
    private U64() {}

    /** The largest token, sequence or mark this package carries. */
    public static final long MAX = Long.MAX_VALUE;

    private static final BigInteger LONG_MAX = BigInteger.valueOf(Long.MAX_VALUE);

    /**
     * {@code value}, when it is a u64 this package can carry.
     *
     * @throws InvalidArgumentException ({@code number_negative}) naming {@code field} when it is negative
     */
    public static long check(long value, String field) {
        if (value < 0) {
            throw new InvalidArgumentException(field, "is " + value + ", negative: tokens and sequences are 0 or more"
                    + " (a negative long is refused, not read as a value above 2^63)", "number_negative");
        }
        return value;
    }

    /**
     * {@code value}, non-null and holding a u64 this package can carry when present.
     *
     * @throws InvalidArgumentException naming {@code field} when it holds a negative value
     */
    public static OptionalLong check(OptionalLong value, String field) {
        Objects.requireNonNull(value, field);
        if (value.isPresent()) {
            check(value.getAsLong(), field);
        }
        return value;
    }

    /**
     * A u64 from elsewhere (a grant's {@code fencing_token} read as a {@link BigInteger}
     * from the lock service's JSON, say) as the {@code long} this package carries.
     *
     * @throws InvalidArgumentException {@code number_negative} below 0, {@code number_above_signed}
     *     above 2^63-1 (a {@code long} cannot hold it, and is never made to wrap)
     */
    public static long of(BigInteger value, String field) {
        Objects.requireNonNull(value, field);
        if (value.signum() < 0) {
            throw new InvalidArgumentException(field, "is " + value + ", negative: tokens and sequences are 0 or more",
                    "number_negative");
        }
        if (value.compareTo(LONG_MAX) > 0) {
            throw new InvalidArgumentException(field, "is " + value + ", above 9223372036854775807 (2^63-1), the largest"
                    + " a signed 64-bit integer holds", "number_above_signed");
        }
        return value.longValue();
    }
}
