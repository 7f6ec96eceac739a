// @fencing/guard: fencing-token admission checks for JavaScript.
//
// The rules are the fencing:guard@0.1.0 WebAssembly component (the same
// .wasm every fencing host runs), transpiled by jco into dist/. This file is
// the only code that calls it: it validates every value before it crosses
// (jco's glue would silently wrap an out-of-range u64: -1n would become
// 2^64-1 and be admitted), turns jco's thrown ComponentError for a rejection
// into a returned value, and interns lock names.
//
// Values: tokens, sequences and high-water marks are BigInt in 0..2^64-1 (a
// non-negative safe-integer Number is accepted and converted); answers always
// carry BigInt. Reasons use the names of the HTTP API and the metrics
// (`stale_token`, ...).
import { check } from './dist/fencing_rules.js';

export const U64_MAX = (1n << 64n) - 1n;

const POLICIES = {
  'non-decreasing': 'non-decreasing',
  non_decreasing: 'non-decreasing',
  'strictly-increasing': 'strictly-increasing',
  strictly_increasing: 'strictly-increasing',
};

/** Byte N of a batch or stream verdict list is case N of the WIT `enum verdict-code`. */
const CODES = ['admitted', 'admitted_new_term', 'invalid_token', 'wrong_lock', 'stale_token', 'token_reused', 'sequence_regressed'];

function u64(value, what) {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`${what} must be a non-negative safe integer or a BigInt, got ${value}`);
    }
    return BigInt(value);
  }
  if (typeof value !== 'bigint') throw new TypeError(`${what} must be a BigInt (or a safe-integer Number), got ${typeof value}`);
  if (value < 0n || value > U64_MAX) throw new RangeError(`${what} must be in 0..2^64-1, got ${value}`);
  return value;
}

function optionalU64(value, what) {
  return value === undefined || value === null ? null : u64(value, what);
}

function lockName(value, what) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, got ${typeof value}`);
  if (!value.isWellFormed()) throw new RangeError(`${what} is not well-formed Unicode (a lone surrogate)`);
  return value;
}

function policyOf(value) {
  const p = POLICIES[value ?? 'non-decreasing'];
  if (p === undefined) throw new RangeError(`policy must be non-decreasing or strictly-increasing, got ${value}`);
  return p;
}

function fenceOf(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object') throw new TypeError(`${what} must be a fence object or null`);
  return {
    lock: lockName(value.lock, `${what}.lock`),
    highWater: u64(value.highWater, `${what}.highWater`),
    sequence: optionalU64(value.sequence, `${what}.sequence`),
  };
}

function code(byte) {
  const c = CODES[byte];
  if (c === undefined) throw new Error(`the component returned unknown verdict code ${byte}`);
  return c;
}

function rejection(r) {
  const reason = r.tag.replaceAll('-', '_');
  if (reason === 'stale_token' || reason === 'token_reused') {
    return { admitted: false, reason, presented: r.val.presented, highWater: r.val.highWater };
  }
  if (reason === 'sequence_regressed') {
    return { admitted: false, reason, token: r.val.token, presented: r.val.presented ?? null, last: r.val.last };
  }
  return { admitted: false, reason };
}

export class Guard {
  /**
   * @param {{maxLocks?: number}} [options] how many lock names to keep interned
   * (at least 2); past that the handles are dropped and interning starts over.
   */
  constructor(options = {}) {
    const maxLocks = options.maxLocks ?? 4096;
    if (!Number.isSafeInteger(maxLocks) || maxLocks < 2) throw new RangeError('maxLocks must be an integer of at least 2');
    this.maxLocks = maxLocks;
    this.locks = new Map();
  }

  /** The handles of `names` for one call; room for all of them is made first. */
  handles(...names) {
    const wanted = names.filter((n) => n !== null);
    const missing = new Set(wanted.filter((n) => !this.locks.has(n)));
    if (this.locks.size + missing.size > this.maxLocks) {
      for (const handle of this.locks.values()) handle[Symbol.dispose ?? Symbol.for('dispose')]();
      this.locks.clear();
      wanted.forEach((n) => missing.add(n));
    }
    for (const n of missing) this.locks.set(n, new check.LockName(n));
    return names.map((n) => (n === null ? undefined : this.locks.get(n)));
  }

  /**
   * Decides one write against the resource's fence (null: none yet).
   * A refusal is returned, never thrown.
   */
  admit(current, presented, policy) {
    const fence = fenceOf(current, 'current');
    if (presented === null || typeof presented !== 'object') throw new TypeError('presented must be a sequencer object');
    const lock = lockName(presented.lock, 'presented.lock');
    const token = u64(presented.token, 'presented.token');
    const sequence = optionalU64(presented.sequence, 'presented.sequence');
    const p = policyOf(policy);
    const [fenceLock, presentedLock] = this.handles(fence?.lock ?? null, lock);
    const witFence = fence && { lock: fenceLock, highWater: fence.highWater, sequence: fence.sequence ?? undefined };
    // jco reports a rejection by throwing; capturing a stack trace for it is
    // most of a refused call's cost, and the trace is never shown.
    const traces = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      const a = check.admit(witFence ?? undefined, { lock: presentedLock, token, sequence: sequence ?? undefined }, p);
      return { admitted: true, highWater: a.highWater, sequence: a.sequence ?? null, newTerm: a.newTerm };
    } catch (e) {
      // jco throws a top-level `result` error as a ComponentError whose payload is the rejection.
      if (e && typeof e === 'object' && 'payload' in e && e.payload && typeof e.payload.tag === 'string') {
        return rejection(e.payload);
      }
      throw e;
    } finally {
      Error.stackTraceLimit = traces;
    }
  }

  /**
   * Decides writes to one resource under one lock, in order, each against the
   * fence the admitted ones before it leave. A write is `{token, sequence?}`
   * or a bare token.
   */
  admitBatch(current, lock, writes, policy) {
    const fence = fenceOf(current, 'current');
    const name = lockName(lock, 'lock');
    if (!Array.isArray(writes)) throw new TypeError('writes must be an array');
    const ws = writes.map((w, i) =>
      typeof w === 'object' && w !== null
        ? { token: u64(w.token, `writes[${i}].token`), sequence: optionalU64(w.sequence, `writes[${i}].sequence`) }
        : { token: u64(w, `writes[${i}]`), sequence: null },
    );
    const p = policyOf(policy);
    const [fenceLock, handle] = this.handles(fence?.lock ?? null, name);
    const witFence = fence && { lock: fenceLock, highWater: fence.highWater, sequence: fence.sequence ?? undefined };
    const out = check.admitBatch(
      witFence ?? undefined,
      handle,
      ws.map((w) => ({ token: w.token, sequence: w.sequence ?? undefined })),
      p,
    );
    if (out.verdicts.length !== ws.length) throw new Error(`the component returned ${out.verdicts.length} verdicts for ${ws.length} writes`);
    let state = fence && { highWater: fence.highWater, sequence: fence.sequence };
    const verdicts = ws.map((w, i) => {
      const c = code(out.verdicts[i]);
      if (c === 'admitted' || c === 'admitted_new_term') {
        state = { highWater: w.token, sequence: w.sequence };
        return { admitted: true, highWater: w.token, sequence: w.sequence, newTerm: c === 'admitted_new_term' };
      }
      if (c === 'invalid_token' || c === 'wrong_lock') return { admitted: false, reason: c };
      if (state === null || (c === 'sequence_regressed' && state.sequence === null)) {
        throw new Error(`the component returned ${c} for a write with no fence to compare with`);
      }
      if (c === 'sequence_regressed') return { admitted: false, reason: c, token: w.token, presented: w.sequence, last: state.sequence };
      return { admitted: false, reason: c, presented: w.token, highWater: state.highWater };
    });
    const f = out.fence;
    return { verdicts, fence: f == null ? null : { highWater: f.highWater, sequence: f.sequence ?? null } };
  }

  /**
   * Decides sequence-less tokens on one resource whose lock binding the caller
   * checked and whose fence holds no sequence. `highWater` 0n means no fence.
   */
  admitStream(highWater, tokens, policy) {
    const hw = u64(highWater, 'highWater');
    if (!Array.isArray(tokens) && !(tokens instanceof BigUint64Array)) throw new TypeError('tokens must be an array');
    const ts = BigUint64Array.from(Array.from(tokens, (t, i) => u64(t, `tokens[${i}]`)));
    const out = check.admitStream(hw, ts, policyOf(policy));
    if (out.verdicts.length !== ts.length) throw new Error(`the component returned ${out.verdicts.length} verdicts for ${ts.length} tokens`);
    const verdicts = Array.from(out.verdicts, (byte) => {
      const c = code(byte);
      if (c === 'wrong_lock' || c === 'sequence_regressed') throw new Error(`the component returned ${c} in a stream`);
      return c === 'admitted_new_term' ? 'admitted' : c;
    });
    return { verdicts, highWater: out.highWater };
  }
}
