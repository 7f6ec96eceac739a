package org.fencing.guard;

/**
 * A value the hosts' rules refuse (a lock name, a token, a proof): {@link #code()}
 * names the rule ({@code name_control}, {@code number_negative}, ...), the code the
 * shared argument vectors name and every fencing host's error text ends with. A
 * refusal of the contract's own (a stale token) is a {@link Decision}, never this.
 */
public final class InvalidArgumentException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    private final String code;

    /** {@code field} refused for {@code problem} by the rule named {@code code}. */
    public InvalidArgumentException(String field, String problem, String code) {
        super(field + " " + problem + " (" + code + ")");
        this.code = code;
    }

    /** The rule's code: {@code name_empty}, {@code name_too_long}, {@code name_not_utf8},
     * {@code name_control}, {@code name_whitespace}, {@code number_negative},
     * {@code number_above_signed} or {@code proof_too_long}. */
    public String code() {
        return code;
    }
}
