// What the package accepts around the rules: the rules every fencing host
// applies to what it is given (guest/src/accept.rs in the repository), for
// lock names, policy names, tokens and proofs. A value they refuse throws a
// RangeError whose `code` is the rule's (`name_control`, ...), the code the
// shared argument vectors name and every host's error text ends with; a
// value of the wrong type throws a TypeError. A refusal of the contract's own
// (a stale token) is an answer, never an exception.
//
// - a name is 1 to 256 characters (code points) of well-formed Unicode (a
//   lone surrogate is not text) with no control character (U+0000-U+001F,
//   U+007F-U+009F: NUL is refused, never truncated at) and no whitespace at
//   either end. Names compare as UTF-8 bytes: nothing normalizes or folds case;
// - a policy is spelled as in the contract: 'non-decreasing' or 'strictly-increasing';
// - a token, sequence or mark is a BigInt from 0 to 2^64-1 (or a
//   non-negative safe-integer Number): below 0 is `number_negative`, above
//   2^64-1 `number_too_large`;
// - a proof is a Uint8Array of at most 256 bytes (a proof is 37 or 69).

export const U64_MAX = (1n << 64n) - 1n;

/** The longest name, in characters. */
export const MAX_NAME_CHARS = 256;

/** The longest proof, in bytes (512 hex digits, the bound of the proof's text). */
export const MAX_PROOF_BYTES = 256;

/** A RangeError naming `what`, the problem and the rule's code, which it carries as `code`. */
export function refusal(what, problem, code) {
  const e = new RangeError(`${what} ${problem} (${code})`);
  e.code = code;
  return e;
}

/** Unicode's White_Space characters, the ones no name begins or ends with (String.prototype.trim's set is another). */
const WHITE_SPACE = new Set(
  '\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000',
);
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** How many code points `text` holds. */
function codePoints(text) {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/**
 * `value` if it is a name, else a TypeError (not a string) or a RangeError
 * with the rule's `code`, naming `what`.
 */
export function checkName(value, what = 'name') {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, got ${typeof value}`);
  if (value === '') throw refusal(what, 'must not be empty', 'name_empty');
  // Two UTF-16 units a character at most: only a longer text needs counting.
  if (value.length > MAX_NAME_CHARS) {
    const n = codePoints(value);
    if (n > MAX_NAME_CHARS) throw refusal(what, `is ${n} characters, longer than ${MAX_NAME_CHARS}`, 'name_too_long');
  }
  if (!value.isWellFormed()) throw refusal(what, 'is not UTF-8 text (a lone surrogate)', 'name_not_utf8');
  const control = CONTROL.exec(value);
  if (control !== null) {
    const hex = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
    throw refusal(what, `contains control character U+${hex}`, 'name_control');
  }
  if (WHITE_SPACE.has(value[0]) || WHITE_SPACE.has(value[value.length - 1])) {
    throw refusal(what, 'must not begin or end with whitespace', 'name_whitespace');
  }
  return value;
}

/** Policy names to the WIT `policy` case index. */
const POLICIES = new Map([
  ['non-decreasing', 0],
  ['strictly-increasing', 1],
]);

/** The WIT case of `value` (undefined or null: the default, non-decreasing). */
export function policyOf(value) {
  const p = POLICIES.get(value ?? 'non-decreasing');
  if (p === undefined) throw refusal('policy', `must be non-decreasing or strictly-increasing, got ${String(value)}`, 'policy_unknown');
  return p;
}

/** `value` as a u64 BigInt, or a TypeError or RangeError naming `what`. */
export function u64(value, what) {
  if (typeof value === 'number') {
    if (Number.isInteger(value) && value < 0) throw refusal(what, `is ${value}, negative: tokens and sequences are 0 or more`, 'number_negative');
    if (!Number.isSafeInteger(value)) throw new RangeError(`${what} must be a non-negative safe integer or a BigInt, got ${value}`);
    return BigInt(value);
  }
  if (typeof value !== 'bigint') throw new TypeError(`${what} must be a BigInt (or a safe-integer Number), got ${typeof value}`);
  // One operation instead of two comparisons: only 0..2^64-1 survives unchanged.
  if (BigInt.asUintN(64, value) !== value) {
    if (value < 0n) throw refusal(what, `is ${value}, negative: tokens and sequences are 0 or more`, 'number_negative');
    throw refusal(what, `is above ${U64_MAX} (2^64-1), the largest token`, 'number_too_large');
  }
  return value;
}

/** True for a BigInt in 0..2^64-1: the check `u64` makes, without building its message. */
export const isU64 = (value) => typeof value === 'bigint' && BigInt.asUintN(64, value) === value;

/** `proof` if it is a proof's bytes, else a TypeError or a RangeError (`proof_too_long`). */
export function checkProof(proof) {
  if (!(proof instanceof Uint8Array)) throw new TypeError('proof must be a Uint8Array');
  if (proof.length > MAX_PROOF_BYTES) throw refusal('proof', `is ${proof.length} bytes, more than ${MAX_PROOF_BYTES}`, 'proof_too_long');
  return proof;
}
