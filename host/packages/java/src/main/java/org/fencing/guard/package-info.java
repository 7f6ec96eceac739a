/**
 * Fencing-token admission checks for the JVM, with the rules of the
 * {@code fencing:guard@0.3.0} WebAssembly component: the same bytes every
 * fencing host runs, so a Java service refuses exactly the writes the
 * reference server, the PostgreSQL and SQLite extensions and the other
 * language packages refuse.
 *
 * <p>The component's core module runs on Chicory (pure Java), compiled to JVM
 * bytecode once per class loader; the canonical ABI is lowered and lifted here
 * by hand, as {@code docs/core-abi.md} in the repository states it.
 *
 * <pre>{@code
 * try (Guard guard = new Guard()) {
 *     Decision d = guard.admit(new Fence("orders", 34), new Sequencer("orders", 33), Policy.NON_DECREASING);
 *     // d is Decision.StaleToken[presented=33, highWater=34]
 * }
 * }</pre>
 *
 * <p>Refusals are values (the sealed {@link org.fencing.guard.Decision}),
 * never exceptions. An exception means the call could not be decided: an
 * {@link java.lang.IllegalArgumentException} for a value the contract cannot
 * take, a {@link org.fencing.guard.GuardException} for a module that broke
 * it. Either way, refuse the write.
 *
 * <p>Tokens, sequences and high-water marks are u64 in the contract and
 * {@code long} here, so this package carries 0 to 2^63-1 and refuses any
 * negative {@code long} rather than reading it as a value above 2^63
 * ({@link org.fencing.guard.U64}): the rule every host that cannot hold a u64
 * follows.
 *
 * <p>Layout: {@code Component} finds the core module in the embedded
 * component; {@code Core} is one instance with its interned lock names and
 * the calls; {@code Guard} is the API (validation, turning codes into
 * decisions, replacing a broken instance); the records and enums are the
 * values.
 */
package org.fencing.guard;
