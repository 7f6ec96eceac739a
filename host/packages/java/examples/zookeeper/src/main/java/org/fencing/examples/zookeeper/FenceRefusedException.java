package org.fencing.examples.zookeeper;

import java.sql.SQLException;
import java.util.Map;
import java.util.Optional;

/**
 * A write that a table under {@code fencing.protect} refused: the extension's
 * SQLSTATE (FN001 to FN005, FN010) as a reason, with the driver's exception
 * as the cause. {@link #of} maps an {@link SQLException}; anything else is
 * not a fence refusal.
 */
public final class FenceRefusedException extends Exception {
    private static final long serialVersionUID = 1L;

    private static final Map<String, String> REASONS = Map.of(
            "FN001", "stale_token",
            "FN002", "token_reused",
            "FN003", "wrong_lock",
            "FN004", "invalid_token",
            "FN005", "sequence_regressed",
            "FN010", "guard_failure");

    private final String reason;
    private final String sqlState;

    private FenceRefusedException(String reason, String sqlState, SQLException cause) {
        super(reason + " (SQLSTATE " + sqlState + "): " + cause.getMessage(), cause);
        this.reason = reason;
        this.sqlState = sqlState;
    }

    /** The refusal {@code e} reports, if it is one. */
    public static Optional<FenceRefusedException> of(SQLException e) {
        String reason = REASONS.get(e.getSQLState());
        return reason == null ? Optional.empty() : Optional.of(new FenceRefusedException(reason, e.getSQLState(), e));
    }

    /** {@code stale_token}, {@code wrong_lock}, ... as the guard names them. */
    public String reason() {
        return reason;
    }

    public String sqlState() {
        return sqlState;
    }
}
