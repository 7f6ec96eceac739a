package org.fencing.guard;

/**
 * The module broke the contract (a trap, a bad pointer, a code its inputs
 * cannot produce): the write could not be decided and must be refused. The
 * guard replaces its instance.
 */
public final class GuardException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public GuardException(String message) {
        super(message);
    }

    public GuardException(String message, Throwable cause) {
        super(message, cause);
    }
}
