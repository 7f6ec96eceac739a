// @fencing/guard: fencing-token admission checks for JavaScript.
//
// The rules are the fencing:guard@0.3.0 WebAssembly component (the same
// .wasm every fencing host runs). Its core module ships in dist/ and runs on
// the platform's own WebAssembly; core.js lowers and lifts the canonical ABI
// by hand (docs/core-abi.md). This file validates every value before it
// crosses (an out-of-range u64 such as -1n would otherwise cross as the bit
// pattern of 2^64-1 and be admitted), interns lock names, and turns the
// module's verdict codes into answers with their evidence, which follows from
// the inputs (wit/guard.wit, `admit-code` and `batch-outcome`).
//
// Values: tokens, sequences and high-water marks are BigInt in 0..2^64-1 (a
// non-negative safe-integer Number is accepted and converted); answers always
// carry BigInt. Reasons use the names of the HTTP API and the metrics
// (`stale_token`, ...). What is accepted as a name, a policy, a number and a
// proof is accept.js's (the hosts' rules; a name is checked when first interned).
import { checkName, checkProof, isU64, policyOf, u64 } from './accept.js';
import { Core, coreModuleBytes, i64 } from './core.js';

export { U64_MAX, checkName } from './accept.js';

/** The core module shipped in dist/, compiled once per process or page. */
async function shippedModule() {
  const url = new URL('./dist/fencing_guard.wasm', import.meta.url);
  const node = typeof process === 'object' && process.versions != null && process.versions.node != null;
  const bytes = node ? await (await import('node:fs/promises')).readFile(url) : await (await fetch(url)).arrayBuffer();
  return WebAssembly.compile(bytes);
}

const SHIPPED = await shippedModule();

/** Byte N of a batch or stream verdict list is case N of the WIT `enum verdict-code`. */
const CODES = ['admitted', 'admitted_new_term', 'invalid_token', 'wrong_lock', 'stale_token', 'token_reused', 'sequence_regressed'];

function optionalU64(value, what) {
  return value === undefined || value === null ? null : u64(value, what);
}

/** A validated fence: {lock, highWater, sequence (BigInt or null)}, or null. */
function fenceOf(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object') throw new TypeError(`${what} must be a fence object or null`);
  return {
    lock: value.lock,
    highWater: u64(value.highWater, `${what}.highWater`),
    sequence: optionalU64(value.sequence, `${what}.sequence`),
  };
}

function code(byte) {
  const c = CODES[byte];
  if (c === undefined) throw new Error(`the module returned unknown verdict code ${byte}`);
  return c;
}

const impossible = (c) => new Error(`the module returned ${c}, which these inputs cannot produce`);

/**
 * The answer verdict code `c` stands for when the write {token, sequence}
 * was decided against `fence` ({highWater, sequence} or null). A code these
 * numbers cannot produce is an error: the call fails closed.
 */
function answer(c, fence, token, sequence) {
  if (c === 'invalid_token') {
    if (token !== 0n) throw impossible(c);
    return { admitted: false, reason: c };
  }
  if (token === 0n) throw impossible(c);
  if (c === 'admitted_new_term') {
    if (fence !== null && token <= fence.highWater) throw impossible(c);
    return { admitted: true, highWater: token, sequence, newTerm: true };
  }
  if (fence === null) throw impossible(c);
  switch (c) {
    case 'admitted':
      if (token !== fence.highWater) throw impossible(c);
      return { admitted: true, highWater: token, sequence, newTerm: false };
    case 'wrong_lock':
      return { admitted: false, reason: c };
    case 'stale_token':
      if (token >= fence.highWater) throw impossible(c);
      return { admitted: false, reason: c, presented: token, highWater: fence.highWater };
    case 'token_reused':
      if (token !== fence.highWater) throw impossible(c);
      return { admitted: false, reason: c, presented: token, highWater: fence.highWater };
    default: // sequence_regressed
      if (token !== fence.highWater || fence.sequence === null) throw impossible(c);
      return { admitted: false, reason: c, token, presented: sequence, last: fence.sequence };
  }
}

/** The flat `option<fence>` of a validated fence, with `rep` its lock's rep. */
function flatFence(fence, rep) {
  if (fence === null) return [0, 0, 0n, 0, 0n];
  const s = fence.sequence;
  return [1, rep, i64(fence.highWater), s === null ? 0 : 1, s === null ? 0n : i64(s)];
}

/** The WIT `key-algorithm` case of each algorithm. */
const ALGORITHMS = new Map([
  ['ed25519', 0],
  ['hmac-sha256', 1],
]);

/** Verdict codes of a proof that does not hold (7, no keys installed, cannot happen: keys go in first). */
const PROOF_REASONS = new Map([
  [8, 'proof_missing'],
  [9, 'proof_malformed'],
  [10, 'proof_unknown_key'],
  [11, 'proof_bad'],
]);

const KEY_ERRORS = ['no keys given', 'more than 64 keys', (id) => `two keys have id ${id}`, (id) => `key ${id} is not a key of its algorithm`];

/**
 * The keys `Guard.admitSigned` checks proofs with: `{id, algorithm
 * ('ed25519' or 'hmac-sha256'), material (Uint8Array)}` each. Checked by the
 * component when a guard first uses them (a bad set throws there). Rotating
 * keys is making a new `Keys`.
 */
export class Keys {
  constructor(keys) {
    if (!Array.isArray(keys)) throw new TypeError('keys must be an array');
    this.keys = keys.map((k, i) => {
      if (k === null || typeof k !== 'object') throw new TypeError(`keys[${i}] must be an object`);
      if (!Number.isInteger(k.id) || k.id < 0 || k.id > 0xffffffff) throw new RangeError(`keys[${i}].id must be an integer in 0..4294967295`);
      const algorithm = ALGORITHMS.get(k.algorithm);
      if (algorithm === undefined) throw new RangeError(`keys[${i}].algorithm must be ed25519 or hmac-sha256, got ${k.algorithm}`);
      if (!(k.material instanceof Uint8Array)) throw new TypeError(`keys[${i}].material must be a Uint8Array`);
      return [k.id, algorithm, k.material.slice()];
    });
    Object.freeze(this);
  }
}

export class Guard {
  /**
   * @param {{maxLocks?: number, component?: Uint8Array}} [options]
   * `maxLocks`: how many lock names to keep interned (at least 2); past that
   * the instance is replaced by a fresh one and interning starts over.
   * `component`: run the rules of this fencing:guard@0.3 component (its
   * bytes) instead of the shipped ones (Node only: it compiles synchronously).
   */
  constructor(options = {}) {
    const maxLocks = options.maxLocks ?? 4096;
    if (!Number.isSafeInteger(maxLocks) || maxLocks < 2) throw new RangeError('maxLocks must be an integer of at least 2');
    this.maxLocks = maxLocks;
    this.module = options.component === undefined ? SHIPPED : new WebAssembly.Module(coreModuleBytes(options.component));
    this.core = new Core(this.module);
  }

  /** The rep of `name` (validated on first sight), making room first when the table is full. */
  rep(name, what) {
    const r = this.core.locks.get(name);
    if (r !== undefined) return r;
    checkName(name, what);
    if (this.core.locks.size >= this.maxLocks) this.core = new Core(this.module);
    return this.core.lock(name);
  }

  /** The reps of a fence's lock (null: no fence, rep 0) and the presented lock, in one instance. */
  reps(fenceLock, lock, lockWhat) {
    if (fenceLock === null) return [0, this.rep(lock, lockWhat)];
    const core = this.core;
    const a = this.rep(fenceLock, 'current.lock');
    const b = this.rep(lock, lockWhat);
    // Interning the second name may have replaced the instance: intern the first again.
    return core === this.core ? [a, b] : [this.rep(fenceLock, 'current.lock'), b];
  }

  /**
   * Decides one write against the resource's fence (null: none yet).
   * A refusal is returned, never thrown.
   */
  admit(current, presented, policy) {
    const fence = fenceOf(current, 'current');
    if (presented === null || typeof presented !== 'object') throw new TypeError('presented must be a sequencer object');
    const token = u64(presented.token, 'presented.token');
    const sequence = optionalU64(presented.sequence, 'presented.sequence');
    const p = policyOf(policy);
    const [fenceRep, rep] = this.reps(fence === null ? null : fence.lock, presented.lock, 'presented.lock');
    const f = flatFence(fence, fenceRep);
    const s = sequence === null ? 0n : i64(sequence);
    const c = this.core.code(f[0], f[1], f[2], f[3], f[4], rep, i64(token), sequence === null ? 0 : 1, s, p);
    return answer(code(c), fence, token, sequence);
  }

  /**
   * Decides one signed write: `proof` (a Uint8Array, the grant's
   * `fencing_proof`) must show that the lock service granted the presented
   * token for the presented lock, under one of `keys`; then the write is
   * decided as `admit` decides it. A proof that does not hold is a refusal
   * with a `proof_*` reason, whatever the token.
   */
  admitSigned(current, presented, proof, keys, policy) {
    const fence = fenceOf(current, 'current');
    if (presented === null || typeof presented !== 'object') throw new TypeError('presented must be a sequencer object');
    if (!(keys instanceof Keys)) throw new TypeError('keys must be a Keys');
    checkProof(proof);
    const token = u64(presented.token, 'presented.token');
    const sequence = optionalU64(presented.sequence, 'presented.sequence');
    const p = policyOf(policy);
    const [fenceRep, rep] = this.reps(fence === null ? null : fence.lock, presented.lock, 'presented.lock');
    const core = this.core;
    if (core.keys !== keys) {
      const refused = core.setKeys(keys.keys);
      if (refused !== null) {
        const why = KEY_ERRORS[refused[0]];
        throw new RangeError(`verifier keys refused: ${typeof why === 'function' ? why(refused[1]) : why}`);
      }
      core.keys = keys;
    }
    const f = flatFence(fence, fenceRep);
    const ptr = core.bytesIn(proof);
    const s = sequence === null ? 0n : i64(sequence);
    const c = core.signed(f[0], f[1], f[2], f[3], f[4], rep, i64(token), sequence === null ? 0 : 1, s, ptr, proof.length, p);
    const refused = PROOF_REASONS.get(c);
    if (refused === undefined) return answer(code(c), fence, token, sequence);
    if (refused === 'proof_unknown_key') {
      if (proof.length < 5) throw impossible(refused);
      return { admitted: false, reason: refused, keyId: new DataView(proof.buffer, proof.byteOffset).getUint32(1, false) };
    }
    return { admitted: false, reason: refused };
  }

  /**
   * Decides writes to one resource under one lock, in order, each against the
   * fence the admitted ones before it leave. A write is `{token, sequence?}`
   * or a bare token.
   */
  admitBatch(current, lock, writes, policy) {
    const fence = fenceOf(current, 'current');
    if (!Array.isArray(writes)) throw new TypeError('writes must be an array');
    const n = writes.length;
    // Every value validated before anything is allocated in the instance.
    const tokens = new Array(n);
    const sequences = new Array(n);
    for (let i = 0; i < n; i++) {
      const w = writes[i];
      let token;
      let sequence = null;
      // A message names the write only when a value is refused: building it for every write costs more than the check.
      if (typeof w === 'object' && w !== null) {
        token = isU64(w.token) ? w.token : u64(w.token, `writes[${i}].token`);
        const s = w.sequence;
        if (s !== undefined && s !== null) sequence = isU64(s) ? s : u64(s, `writes[${i}].sequence`);
      } else token = isU64(w) ? w : u64(w, `writes[${i}]`);
      tokens[i] = token;
      sequences[i] = sequence;
    }
    const lay = (m, at) => {
      const u64 = m.u64;
      for (let i = 0, j = at; i < n; i++, j += 3) {
        u64[j] = tokens[i];
        const s = sequences[i];
        if (s === null) u64[j + 1] = 0n;
        else {
          u64[j + 1] = 1n;
          u64[j + 2] = s;
        }
      }
    };
    return this.batch(fence, lock, n, policy, lay, (i) => tokens[i], (i) => sequences[i]);
  }

  /**
   * `admitBatch` with the writes as columns: write i is `tokens[i]` with
   * `sequences[i]` (omitted or null: no write has a sequence). A
   * `BigUint64Array` is taken as it is (its elements are u64 by type); an
   * `Array` is checked value by value, as `admitBatch` checks it.
   */
  admitColumns(current, lock, tokens, sequences, policy) {
    const fence = fenceOf(current, 'current');
    // Copies: the outcome reads the writes back when its verdicts are built.
    const ts = u64Column(tokens, 'tokens', true);
    const ss = sequences === undefined || sequences === null ? null : u64Column(sequences, 'sequences', true);
    const n = ts.length;
    if (ss !== null && ss.length !== n) throw new RangeError(`sequences has ${ss.length} values for ${n} tokens`);
    // Laid out with 32-bit moves: a BigInt read from a typed array costs an allocation.
    const t32 = new Uint32Array(ts.buffer, ts.byteOffset, 2 * n);
    const s32 = ss === null ? null : new Uint32Array(ss.buffer, ss.byteOffset, 2 * n);
    const lay = (m, at) => {
      const u32 = m.u32;
      if (s32 === null) {
        for (let i = 0, j = 2 * at; i < 2 * n; i += 2, j += 6) {
          u32[j] = t32[i];
          u32[j + 1] = t32[i + 1];
          u32[j + 2] = 0; // the discriminant's word: no sequence
        }
      } else {
        for (let i = 0, j = 2 * at; i < 2 * n; i += 2, j += 6) {
          u32[j] = t32[i];
          u32[j + 1] = t32[i + 1];
          u32[j + 2] = 1;
          u32[j + 4] = s32[i];
          u32[j + 5] = s32[i + 1];
        }
      }
    };
    return this.batch(fence, lock, n, policy, lay, (i) => ts[i], s32 === null ? () => null : (i) => ss[i]);
  }

  /** `admit-batch` over checked writes that `lay` lays out; `tokenAt` and `sequenceAt` read write i back. */
  batch(fence, lock, n, policy, lay, tokenAt, sequenceAt) {
    const p = policyOf(policy);
    const [fenceRep, rep] = this.reps(fence === null ? null : fence.lock, lock, 'lock');
    const out = this.core.batch(flatFence(fence, fenceRep), rep, n, p, lay);
    const start = fence === null ? null : { highWater: fence.highWater, sequence: fence.sequence };
    checkBatchFence(out.codes, start, out.state, tokenAt, sequenceAt);
    return new BatchOutcome(out.codes, start, out.state, tokenAt, sequenceAt);
  }

  /**
   * Decides sequence-less tokens on one resource whose lock binding the caller
   * checked and whose fence holds no sequence. `highWater` 0n means no fence.
   * A BigUint64Array is taken as it is (its elements are u64 by type).
   */
  admitStream(highWater, tokens, policy) {
    const hw = u64(highWater, 'highWater');
    let ts;
    if (tokens instanceof BigUint64Array) ts = tokens;
    else if (Array.isArray(tokens)) ts = u64Column(tokens, 'tokens');
    else throw new TypeError('tokens must be an array or a BigUint64Array');
    const out = this.core.stream(hw, ts, policyOf(policy));
    const last = lastAdmitted(out.codes);
    const expected = last < 0 ? hw : ts[last];
    if (out.highWater !== expected) throw new Error(`the module left the mark ${out.highWater}, the tokens leave ${expected}`);
    return new StreamOutcome(out.codes, out.highWater);
  }
}

/** A column of u64: a BigUint64Array as it is (or a copy), an Array checked value by value. */
function u64Column(values, what, copy = false) {
  if (values instanceof BigUint64Array) return copy ? values.slice() : values;
  if (!Array.isArray(values)) throw new TypeError(`${what} must be an array or a BigUint64Array`);
  const column = new BigUint64Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    column[i] = isU64(v) ? v : u64(v, `${what}[${i}]`);
  }
  return column;
}

/** The index of the last admitted write or token in verdict bytes (-1: none); scanned from the end. */
function lastAdmitted(codes) {
  let i = codes.length - 1;
  while (i >= 0 && codes[i] > 1) i--;
  return i;
}

/**
 * How many verdict bytes are admissions; an unknown code (`known` says which
 * bytes the call can answer) fails closed.
 */
function countAdmitted(codes, known) {
  let admitted = 0;
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (!known(c)) throw new Error(`the module returned verdict code ${c}`);
    if (c < 2) admitted++;
  }
  return admitted;
}

/**
 * What a batch's answer must show whatever its writes, checked before it is
 * returned: the fence after it is the last admitted write's token and
 * sequence (the start fence when none was admitted). Every code is checked
 * (known, and against its write's evidence) when the outcome's verdicts,
 * `admitted` or `admittedCount` are first read.
 */
function checkBatchFence(codes, start, state, tokenAt, sequenceAt) {
  const last = lastAdmitted(codes);
  const expected = last < 0 ? start : { highWater: tokenAt(last), sequence: sequenceAt(last) };
  const same = expected === null ? state === null : state !== null && state.highWater === expected.highWater && state.sequence === expected.sequence;
  if (!same) throw new Error('the module left a fence that is not the last admitted write\'s');
}

const batchCode = (c) => c <= 6;
const streamCode = (c) => STREAM_VERDICTS[c] !== undefined;

/**
 * A batch's answer: `fence` comes with the call (checked against the
 * writes); `verdicts` (a decision per write, with its evidence), `admitted`
 * (a boolean per write) and `admittedCount` are built the first time they are
 * read, and kept.
 */
export class BatchOutcome {
  #codes;
  #start;
  #tokenAt;
  #sequenceAt;
  #verdicts = null;
  #admitted = null;
  #admittedCount = null;

  constructor(codes, start, fence, tokenAt, sequenceAt) {
    this.#codes = codes;
    this.#start = start;
    this.#tokenAt = tokenAt;
    this.#sequenceAt = sequenceAt;
    /** The fence to persist after the batch; null only when nothing was admitted and there was no fence. */
    this.fence = fence;
  }

  /** One decision per write, in order, each against the fence the admitted ones before it left. */
  get verdicts() {
    if (this.#verdicts === null) {
      const codes = this.#codes;
      const verdicts = new Array(codes.length);
      let state = this.#start;
      for (let i = 0; i < codes.length; i++) {
        const v = answer(code(codes[i]), state, this.#tokenAt(i), this.#sequenceAt(i));
        if (v.admitted) state = v;
        verdicts[i] = v;
      }
      this.#verdicts = verdicts;
    }
    return this.#verdicts;
  }

  /** Whether each write was admitted, in order. */
  get admitted() {
    if (this.#admitted === null) this.#admitted = this.verdicts.map((v) => v.admitted);
    return this.#admitted;
  }

  /** How many writes were admitted. */
  get admittedCount() {
    if (this.#admittedCount === null) this.#admittedCount = countAdmitted(this.#codes, batchCode);
    return this.#admittedCount;
  }
}

/**
 * A stream's answer: `highWater` comes with the call (checked against the
 * tokens); `verdicts` and `admittedCount` are built the first time they are
 * read (every code checked then).
 */
export class StreamOutcome {
  #codes;
  #verdicts = null;
  #admittedCount = null;

  constructor(codes, highWater) {
    this.#codes = codes;
    /** The mark after the stream (0n: still no fence). */
    this.highWater = highWater;
  }

  /** One verdict per token, in order. */
  get verdicts() {
    if (this.#verdicts === null) {
      const codes = this.#codes;
      const verdicts = new Array(codes.length);
      for (let i = 0; i < codes.length; i++) {
        const v = STREAM_VERDICTS[codes[i]];
        if (v === undefined) throw new Error(`the module returned verdict code ${codes[i]} in a stream`);
        verdicts[i] = v;
      }
      this.#verdicts = verdicts;
    }
    return this.#verdicts;
  }

  /** How many tokens were admitted. */
  get admittedCount() {
    if (this.#admittedCount === null) this.#admittedCount = countAdmitted(this.#codes, streamCode);
    return this.#admittedCount;
  }
}

/** Stream verdict bytes to answers: a stream has no wrong lock and no sequences, and reports no terms. */
const STREAM_VERDICTS = ['admitted', 'admitted', 'invalid_token', undefined, 'stale_token', 'token_reused'];