// The core-ABI host of the @fencing/guard package (host/packages/node/core.js)
// with `admit` answered by the contract's rich `admit` export instead of
// `admit-code`: the component's 48-byte `result<admission, rejection>` is
// read from guest memory exactly as docs/core-abi.md lays it out. The
// package decides single writes with `admit-code`; run_vectors.mjs --core
// runs every vector through this host, so both exports stay checked in
// JavaScript against the same vectors.
//
// Values: every u64 is a BigInt. `admit` answers in the vectors' vocabulary;
// `batch` and `stream` answer with the raw verdict-code bytes, which the
// caller expands.
import { Core, IFACE, coreModuleBytes, i64 } from '../../host/packages/node/core.js';

const POLICY = { non_decreasing: 0, strictly_increasing: 1 };
const REJECTIONS = ['invalid_token', 'wrong_lock', 'stale_token', 'token_reused', 'sequence_regressed'];

function policy(p) {
  const v = POLICY[p];
  if (v === undefined) throw new Error(`unknown policy ${p}`);
  return v;
}

function optionAt(v, at) {
  const d = v.getUint8(at);
  if (d > 1) throw new Error(`option discriminant ${d}`);
  return d === 1 ? v.getBigUint64(at + 8, true) : null;
}

export class CoreGuard {
  /** Instantiates the core module of component `bytes`. */
  constructor(bytes) {
    this.core = new Core(new WebAssembly.Module(coreModuleBytes(bytes)));
  }

  /** The flat option<fence>: 5 values. */
  fence(f) {
    if (f == null) return [0, 0, 0n, 0, 0n];
    const seq = f.sequence ?? null;
    return [1, this.core.lock(f.lock), i64(f.high_water), seq === null ? 0 : 1, i64(seq ?? 0n)];
  }

  admit(current, presented, p) {
    const fence = this.fence(current);
    const lock = this.core.lock(presented.lock);
    const seq = presented.sequence ?? null;
    const ret = this.core.exports[`${IFACE}#admit`](...fence, lock, i64(presented.token), seq === null ? 0 : 1, i64(seq ?? 0n), policy(p));
    const at = this.core.record(ret, 48);
    const v = new DataView(this.core.memory.buffer);
    const u64 = (o) => v.getBigUint64(at + o, true);
    const tag = v.getUint8(at);
    if (tag === 0) {
      return { verdict: 'admitted', high_water: u64(8), sequence: optionAt(v, at + 16), new_term: v.getUint8(at + 32) !== 0 };
    }
    if (tag !== 1) throw new Error(`result discriminant ${tag}`);
    const verdict = REJECTIONS[v.getUint8(at + 8)];
    if (verdict === undefined) throw new Error(`rejection case ${v.getUint8(at + 8)}`);
    if (verdict === 'stale_token' || verdict === 'token_reused') return { verdict, presented: u64(16), high_water: u64(24) };
    if (verdict === 'sequence_regressed') return { verdict, token: u64(16), presented: optionAt(v, at + 24), last: u64(40) };
    return { verdict };
  }

  batch(current, lock, writes, p) {
    const words = new BigUint64Array(writes.length * 3);
    writes.forEach((w, i) => {
      words[i * 3] = w.token;
      if (w.sequence != null) [words[i * 3 + 1], words[i * 3 + 2]] = [1n, w.sequence];
    });
    const out = this.core.batch(this.fence(current), this.core.lock(lock), writes.length, policy(p), (m, at) => m.u64.set(words, at));
    const s = out.state;
    return { codes: out.codes, fence: s && { high_water: s.highWater, sequence: s.sequence } };
  }

  stream(highWater, tokens, p) {
    return this.core.stream(highWater, BigUint64Array.from(tokens), policy(p));
  }
}
