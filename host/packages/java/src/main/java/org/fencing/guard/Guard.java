package org.fencing.guard;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Decides writes with the rules of the fencing:guard component.
 *
 * <p>Thread safety: a Guard is safe for concurrent use; its calls take turns
 * on one instance (each method is {@code synchronized}). For parallel
 * decisions use one Guard per thread: instances share the compiled module.
 */
public final class Guard implements AutoCloseable {
    private final Component.Compiled compiled;
    private final int maxLocks;
    private Core core;
    private boolean closed;

    /** A guard running the embedded component, keeping at most 4,096 lock names interned. */
    public Guard() {
        this(Component.shipped(), 4096);
    }

    /**
     * A guard running the embedded component. Past {@code maxLocks} interned
     * lock names (at least 2) the instance is replaced and interning starts
     * over, so unbounded lock names hold bounded memory.
     */
    public Guard(int maxLocks) {
        this(Component.shipped(), maxLocks);
    }

    private Guard(Component.Compiled compiled, int maxLocks) {
        if (maxLocks < 2) {
            throw new IllegalArgumentException("maxLocks is " + maxLocks + ": at least 2");
        }
        this.compiled = compiled;
        this.maxLocks = maxLocks;
        this.core = new Core(compiled);
    }

    /** A guard running another fencing:guard@0.3 component (its bytes), compiled for it alone. */
    public static Guard ofComponent(byte[] component) {
        return new Guard(Component.compile(Objects.requireNonNull(component, "component")), 4096);
    }

    @Override
    public synchronized void close() {
        closed = true;
        core = null;
    }

    private Core ready() {
        if (closed) {
            throw new IllegalStateException("the guard is closed");
        }
        if (core == null) {
            core = new Core(compiled);
        }
        return core;
    }

    /** Runs {@code call} on the instance; an instance whose call failed is dropped. */
    private <T> T guarded(java.util.function.Supplier<T> call) {
        try {
            return call.get();
        } catch (GuardException e) {
            core = null;
            throw e;
        }
    }

    /**
     * The reps of the fence's lock (0 without a fence) and of {@code lock}, interned in one
     * instance. A name is checked ({@link Names}) when the instance first sees it: an
     * interned name was checked then, and is not checked again.
     */
    private int[] reps(Fence current, String lock, String field) {
        Objects.requireNonNull(lock, field);
        Core c = ready();
        int fresh = 0;
        if (current != null && !c.locks.containsKey(current.lock())) {
            Names.check(current.lock(), "current.lock");
            fresh++;
        }
        if (!c.locks.containsKey(lock)) {
            Names.check(lock, field);
            fresh++;
        }
        if (fresh > 0 && c.locks.size() + fresh > maxLocks) {
            core = null;
            c = ready();
        }
        Core instance = c;
        return guarded(() -> new int[] {current == null ? 0 : instance.lock(current.lock()), instance.lock(lock)});
    }

    /**
     * Decides one write against the resource's fence ({@code null}: none yet).
     * A refusal is a {@link Decision}, not an exception.
     */
    public synchronized Decision admit(Fence current, Sequencer presented, Policy policy) {
        Objects.requireNonNull(presented, "presented");
        Objects.requireNonNull(policy, "policy");
        int[] reps = reps(current, presented.lock(), "presented.lock");
        Core c = core;
        return guarded(() -> decision(
                c.admitCode(current, reps[0], reps[1], presented, policy),
                current == null ? null : new FenceState(current.highWater(), current.sequence()),
                presented.token(),
                presented.sequence()));
    }

    /**
     * Decides writes to one resource under one lock, in order, each against
     * the fence the admitted ones before it leave.
     */
    /** The longest proof, in bytes (512 hex digits, the bound of the proof's text; a proof is 37 or 69 bytes). */
    public static final int MAX_PROOF_BYTES = 256;

    private static final String[] KEY_ERRORS = {
        "no keys given", "more than 64 keys", "two keys have id %d", "key %d is not a key of its algorithm"
    };

    /**
     * Decides one signed write: {@code proof} (the grant's {@code fencing_proof}, as bytes) must
     * show that the lock service granted the presented token for the presented lock, under one of
     * {@code keys}; then the write is decided as {@link #admit} decides it. A proof that does not
     * hold is a {@link Decision.ProofRefused}, whatever the token.
     *
     * @throws IllegalArgumentException when the component refuses {@code keys}
     */
    public synchronized Decision admitSigned(Fence current, Sequencer presented, byte[] proof, Keys keys, Policy policy) {
        Objects.requireNonNull(presented, "presented");
        Objects.requireNonNull(proof, "proof");
        Objects.requireNonNull(keys, "keys");
        Objects.requireNonNull(policy, "policy");
        if (proof.length > MAX_PROOF_BYTES) {
            throw new InvalidArgumentException(
                    "proof", "is " + proof.length + " bytes, more than " + MAX_PROOF_BYTES, "proof_too_long");
        }
        int[] reps = reps(current, presented.lock(), "presented.lock");
        Core c = core;
        if (c.keys != keys) {
            long[] refused = guarded(() -> c.setKeys(keys));
            if (refused != null) {
                throw new IllegalArgumentException(
                        "verifier keys refused: " + String.format(KEY_ERRORS[(int) refused[0]], refused[1]));
            }
            c.keys = keys;
        }
        long code = guarded(() -> c.admitSigned(current, reps[0], reps[1], presented, proof, policy));
        return switch ((int) code) {
            case 8 -> new Decision.ProofRefused("proof_missing", OptionalLong.empty());
            case 9 -> new Decision.ProofRefused("proof_malformed", OptionalLong.empty());
            case 10 -> {
                if (proof.length < 5) {
                    core = null;
                    throw new GuardException("proof_unknown_key for a proof that names no key");
                }
                long id = java.nio.ByteBuffer.wrap(proof, 1, 4).getInt() & 0xffffffffL;
                yield new Decision.ProofRefused("proof_unknown_key", OptionalLong.of(id));
            }
            case 11 -> new Decision.ProofRefused("proof_bad", OptionalLong.empty());
            default -> guarded(() -> decision(
                    code,
                    current == null ? null : new FenceState(current.highWater(), current.sequence()),
                    presented.token(),
                    presented.sequence()));
        };
    }

    public synchronized BatchOutcome admitBatch(Fence current, String lock, List<Write> writes, Policy policy) {
        Objects.requireNonNull(writes, "writes");
        Objects.requireNonNull(policy, "policy");
        for (int i = 0; i < writes.size(); i++) {
            Objects.requireNonNull(writes.get(i), "writes[" + i + "]");
        }
        int[] reps = reps(current, lock, "lock");
        Core c = core;
        return guarded(() -> {
            Core.Batch out = c.batch(current, reps[0], reps[1], writes, policy);
            FenceState state = current == null ? null : new FenceState(current.highWater(), current.sequence());
            List<Decision> decisions = new ArrayList<>(writes.size());
            for (int i = 0; i < writes.size(); i++) {
                Write w = writes.get(i);
                Decision d = decision(out.codes()[i], state, w.token(), w.sequence());
                if (d instanceof Decision.Admitted a) {
                    state = new FenceState(a.highWater(), a.sequence());
                }
                decisions.add(d);
            }
            return new BatchOutcome(List.copyOf(decisions), Optional.ofNullable(out.after()));
        });
    }

    /**
     * Decides sequence-less tokens on one resource whose lock binding the
     * caller checked and whose fence holds no sequence; {@code highWater} 0
     * means no fence.
     */
    public synchronized StreamOutcome admitStream(long highWater, long[] tokens, Policy policy) {
        U64.check(highWater, "highWater");
        Objects.requireNonNull(tokens, "tokens");
        Objects.requireNonNull(policy, "policy");
        for (int i = 0; i < tokens.length; i++) {
            U64.check(tokens[i], "tokens[" + i + "]");
        }
        Core c = ready();
        return guarded(() -> {
            Core.Stream out = c.stream(highWater, tokens, policy);
            List<Verdict> verdicts = new ArrayList<>(tokens.length);
            for (byte b : out.codes()) {
                Verdict v = Verdict.ofCode(b & 0xff);
                switch (v) {
                    case ADMITTED, ADMITTED_NEW_TERM -> verdicts.add(Verdict.ADMITTED);
                    case INVALID_TOKEN, STALE_TOKEN, TOKEN_REUSED -> verdicts.add(v);
                    default -> throw new GuardException("verdict " + v.reason() + " in a stream");
                }
            }
            return new StreamOutcome(List.copyOf(verdicts), out.highWater());
        });
    }

    /**
     * What {@code code} means for the write (token, sequence) decided against
     * {@code fence} (null: none). A code these numbers cannot produce is a
     * {@link GuardException}: the call fails closed.
     */
    static Decision decision(long code, FenceState fence, long token, OptionalLong sequence) {
        Verdict v = Verdict.ofCode(code);
        if (v == Verdict.INVALID_TOKEN) {
            if (token != 0) {
                throw impossible(v);
            }
            return new Decision.InvalidToken();
        }
        if (token == 0) {
            throw impossible(v);
        }
        if (v == Verdict.ADMITTED_NEW_TERM) {
            if (fence != null && token <= fence.highWater()) {
                throw impossible(v);
            }
            return new Decision.Admitted(token, sequence, true);
        }
        if (fence == null) {
            throw impossible(v);
        }
        return switch (v) {
            case ADMITTED -> {
                if (token != fence.highWater()) {
                    throw impossible(v);
                }
                yield new Decision.Admitted(token, sequence, false);
            }
            case WRONG_LOCK -> new Decision.WrongLock();
            case STALE_TOKEN -> {
                if (token >= fence.highWater()) {
                    throw impossible(v);
                }
                yield new Decision.StaleToken(token, fence.highWater());
            }
            case TOKEN_REUSED -> {
                if (token != fence.highWater()) {
                    throw impossible(v);
                }
                yield new Decision.TokenReused(token, fence.highWater());
            }
            case SEQUENCE_REGRESSED -> {
                if (token != fence.highWater() || fence.sequence().isEmpty()) {
                    throw impossible(v);
                }
                yield new Decision.SequenceRegressed(token, sequence, fence.sequence().getAsLong());
            }
            default -> throw impossible(v);
        };
    }

    private static GuardException impossible(Verdict v) {
        return new GuardException("the module returned " + v.reason() + ", which these inputs cannot produce");
    }
}
