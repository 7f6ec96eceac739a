package org.fencing.guard;

import java.util.Objects;

/**
 * The name rule every fencing host applies (guest/src/accept.rs in the repository): a
 * name is 1 to {@value #MAX_CHARS} characters (code points) of Unicode text (a lone
 * surrogate is not text) with no control character (U+0000-U+001F, U+007F-U+009F: NUL
 * is refused, never truncated at) and no white space (Unicode's White_Space) at either
 * end. Names compare as UTF-8 bytes: nothing normalizes or folds case. A {@link Guard}
 * checks a lock name once, when it first interns it.
 */
public final class Names {
    private Names() {}

    /** The longest name, in characters. */
    public static final int MAX_CHARS = 256;

    /**
     * {@code name}, when it is a name every fencing host takes.
     *
     * @throws InvalidArgumentException with the rule's code when it is not
     */
    public static String check(String name) {
        return check(name, "name");
    }

    static String check(String name, String field) {
        Objects.requireNonNull(name, field);
        if (name.isEmpty()) {
            throw new InvalidArgumentException(field, "must not be empty", "name_empty");
        }
        // Two chars a character at most: only a longer string needs counting.
        if (name.length() > MAX_CHARS) {
            int n = name.codePointCount(0, name.length());
            if (n > MAX_CHARS) {
                throw new InvalidArgumentException(field, "is " + n + " characters, longer than " + MAX_CHARS, "name_too_long");
            }
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < name.length() && Character.isLowSurrogate(name.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                throw new InvalidArgumentException(field, "is not UTF-8 text (a lone surrogate at " + i + ")", "name_not_utf8");
            }
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
                throw new InvalidArgumentException(
                        field, String.format("contains control character U+%04X", (int) c), "name_control");
            }
        }
        if (whiteSpace(name.charAt(0)) || whiteSpace(name.charAt(name.length() - 1))) {
            throw new InvalidArgumentException(field, "must not begin or end with white space", "name_whitespace");
        }
        return name;
    }

    /** Unicode's White_Space (Character.isWhitespace is another set); every one is a single char. */
    private static boolean whiteSpace(char c) {
        return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680
                || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f
                || c == 0x3000;
    }
}
