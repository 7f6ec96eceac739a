package org.fencing.guard;

/** The WIT verdict-code: what was decided (the ordinal is the code). */
public enum Verdict {
    ADMITTED("admitted"),
    ADMITTED_NEW_TERM("admitted_new_term"),
    INVALID_TOKEN("invalid_token"),
    WRONG_LOCK("wrong_lock"),
    STALE_TOKEN("stale_token"),
    TOKEN_REUSED("token_reused"),
    SEQUENCE_REGRESSED("sequence_regressed");

    private static final Verdict[] BY_CODE = values();
    private final String reason;

    Verdict(String reason) {
        this.reason = reason;
    }

    /** The name the HTTP API and the metrics use. */
    public String reason() {
        return reason;
    }

    /** The verdict of {@code code}, or a {@link GuardException} for a code the contract does not have. */
    static Verdict ofCode(long code) {
        if (code < 0 || code >= BY_CODE.length) {
            throw new GuardException("the module returned unknown verdict code " + code);
        }
        return BY_CODE[(int) code];
    }
}
