/** Fencing-token admission checks: the fencing:guard@0.3.0 rules on the platform's WebAssembly, validated and typed. */

/** 2^64 - 1, the largest token. */
export declare const U64_MAX: bigint;

/** A token, sequence or high-water mark: a BigInt in 0..2^64-1, or a non-negative safe-integer Number. */
export type U64 = bigint | number;

/** How tokens are compared with the stored high-water mark, by the contract's names (any other text throws `policy_unknown`). */
export type Policy = 'non-decreasing' | 'strictly-increasing';

/**
 * The rule's codes a refused argument carries as the RangeError's `code` (and at the end of its message):
 * names, policies, numbers and proofs as every fencing host refuses them.
 */
export type ArgumentCode =
  | 'name_empty'
  | 'name_too_long'
  | 'name_not_utf8'
  | 'name_control'
  | 'name_whitespace'
  | 'policy_unknown'
  | 'number_negative'
  | 'number_too_large'
  | 'proof_too_long';

/**
 * `name` if the hosts' name rule takes it (1 to 256 characters, no control
 * character, no whitespace at either end, well-formed); else throws a
 * RangeError with its `code` (a TypeError for a non-string). The guard applies
 * it to every lock name when first interned.
 */
export declare function checkName(name: string, what?: string): string;

/** What a storage engine keeps beside a resource. */
export interface Fence {
  /** The lock the resource is bound to (compared as UTF-8 bytes). */
  lock: string;
  /** The highest admitted token. */
  highWater: U64;
  /** The last sequence admitted under `highWater`, if any. */
  sequence?: U64 | null;
}

/** What a writer presents with a write. */
export interface Sequencer {
  lock: string;
  /** The fencing token; 0 is never valid. */
  token: U64;
  sequence?: U64 | null;
}

/** An admitted write: persist `{lock: presented.lock, highWater, sequence}` with it. */
export interface Admission {
  admitted: true;
  highWater: bigint;
  sequence: bigint | null;
  /** True when the write began a new token (no fence before, or a higher token). */
  newTerm: boolean;
}

/** A refused write and its evidence. */
export type Rejection =
  | { admitted: false; reason: 'invalid_token' | 'wrong_lock' }
  | { admitted: false; reason: 'stale_token' | 'token_reused'; presented: bigint; highWater: bigint }
  | { admitted: false; reason: 'sequence_regressed'; token: bigint; presented: bigint | null; last: bigint };

export type Decision = Admission | Rejection;

/** A signed write's refusal by its proof (`Guard.admitSigned`). */
export type ProofRejection =
  | { admitted: false; reason: 'proof_missing' | 'proof_malformed' | 'proof_bad' }
  | { admitted: false; reason: 'proof_unknown_key'; keyId: number };

/** A key the storage trusts to have made proofs. */
export interface VerifierKey {
  id: number;
  algorithm: 'ed25519' | 'hmac-sha256';
  /** The Ed25519 public key (32 bytes) or the HMAC secret (32 to 64 bytes). */
  material: Uint8Array;
}

/** The keys `Guard.admitSigned` checks proofs with (checked by the component at first use). */
export declare class Keys {
  constructor(keys: VerifierKey[]);
}

/** One write of a batch. */
export interface BatchWrite {
  token: U64;
  sequence?: U64 | null;
}

/** A batch's answer: `fence` and `admittedCount` come with the call; `verdicts` and `admitted` are built on first read. */
export declare class BatchOutcome {
  /** One decision per write, in order. */
  readonly verdicts: Decision[];
  /** Whether each write was admitted, in order. */
  readonly admitted: boolean[];
  /** How many writes were admitted. */
  readonly admittedCount: number;
  /** The fence to persist after the batch; null only when nothing was admitted and there was no fence. */
  readonly fence: { highWater: bigint; sequence: bigint | null } | null;
}

/** A stream's answer: `highWater` and `admittedCount` come with the call; `verdicts` is built on first read. */
export declare class StreamOutcome {
  readonly verdicts: Array<'admitted' | 'invalid_token' | 'stale_token' | 'token_reused'>;
  /** How many tokens were admitted. */
  readonly admittedCount: number;
  /** The mark after the stream (0n: still no fence). */
  readonly highWater: bigint;
}

export declare class Guard {
  /**
   * `maxLocks`: lock names kept interned (at least 2, default 4096).
   * `component`: the bytes of another fencing:guard@0.3 component to run
   * instead of the shipped rules (Node only).
   */
  constructor(options?: { maxLocks?: number; component?: Uint8Array });
  /** Decides one write against the resource's fence (null: none yet). Never throws for a refusal. */
  admit(current: Fence | null | undefined, presented: Sequencer, policy?: Policy): Decision;
  /** Decides writes to one resource under one lock, in order. */
  admitBatch(current: Fence | null | undefined, lock: string, writes: Array<BatchWrite | U64>, policy?: Policy): BatchOutcome;
  /**
   * `admitBatch` with the writes as columns: write i is `tokens[i]` with `sequences[i]` (omitted: no sequences).
   * A BigUint64Array is taken as it is; an Array is checked value by value.
   */
  admitColumns(
    current: Fence | null | undefined,
    lock: string,
    tokens: BigUint64Array | U64[],
    sequences?: BigUint64Array | U64[] | null,
    policy?: Policy,
  ): BatchOutcome;
  /** Decides sequence-less tokens on a resource whose binding the caller checked; `highWater` 0 means no fence. */
  admitStream(highWater: U64, tokens: Iterable<U64> | BigUint64Array, policy?: Policy): StreamOutcome;
  /** Decides one signed write: its proof is checked with `keys` first, then the fence as `admit` does. */
  admitSigned(current: Fence | null | undefined, presented: Sequencer, proof: Uint8Array, keys: Keys, policy?: Policy): Decision | ProofRejection;
}
