// A host of the fencing:guard rules that has no component-model support:
// Node's built-in WebAssembly API runs the component's core module, and this
// file lowers and lifts the canonical ABI itself, exactly as docs/core-abi.md
// describes (no jco, no generated glue). run_vectors.mjs --core runs every
// shared vector through it.
//
// Values: every u64 is a BigInt (passed to the module as an i64 bit pattern).
// `admit` answers in the vectors' vocabulary; `batch` and `stream` answer with
// the raw verdict-code bytes, which the caller expands.

const IFACE = 'fencing:guard/check@0.1.0';
const POLICY = { non_decreasing: 0, strictly_increasing: 1 };
const REJECTIONS = ['invalid_token', 'wrong_lock', 'stale_token', 'token_reused', 'sequence_regressed'];

/** LEB128 u32 at `p`: [value, next offset]. */
function leb(bytes, p) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const b = bytes[p++];
    if (b === undefined) throw new Error('truncated component');
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return [value, p];
    shift += 7;
  }
}

/** The one core module of component `bytes` that exports `${IFACE}#admit`. */
export function findCoreModule(bytes) {
  const header = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
  if (!header.every((b, i) => bytes[i] === b)) throw new Error('not a component binary');
  const found = [];
  let p = 8;
  while (p < bytes.length) {
    const id = bytes[p];
    const [size, start] = leb(bytes, p + 1);
    const payload = bytes.subarray(start, start + size);
    if (id === 1) {
      const module = new WebAssembly.Module(payload);
      if (WebAssembly.Module.exports(module).some((e) => e.name === `${IFACE}#admit`)) found.push(module);
    }
    p = start + size;
  }
  if (found.length !== 1) throw new Error(`expected one core module implementing ${IFACE}, found ${found.length}`);
  return found[0];
}

export class CoreGuard {
  /** Instantiates the core module of component `bytes`. */
  constructor(bytes) {
    const module = findCoreModule(bytes);
    const handles = [null]; // handle N is handles[N]; 0 is never a handle
    const rep = (h) => {
      const r = handles[h];
      if (r == null) throw new Error(`unknown lock-name handle ${h}`);
      return r;
    };
    const imports = {
      [`[export]${IFACE}`]: {
        '[resource-new]lock-name': (r) => handles.push(r) - 1,
        '[resource-rep]lock-name': (h) => rep(h),
        '[resource-drop]lock-name': (h) => {
          rep(h);
          handles[h] = null;
        },
      },
    };
    this.exports = new WebAssembly.Instance(module, imports).exports;
    this.rep = rep;
    this.locks = new Map(); // name -> rep
  }

  fn(name) {
    const f = this.exports[name];
    if (typeof f !== 'function') throw new Error(`the module has no function ${name}`);
    return f;
  }

  view() {
    return new DataView(this.exports.memory.buffer);
  }

  alloc(size, align) {
    const ptr = this.fn('cabi_realloc')(0, 0, align, size) >>> 0;
    if (ptr % align !== 0 || ptr + size > this.exports.memory.buffer.byteLength) {
      throw new Error(`cabi_realloc returned ${ptr} for ${size} bytes`);
    }
    return ptr;
  }

  /** The rep of `name`'s lock-name, interned once. */
  lock(name) {
    let r = this.locks.get(name);
    if (r === undefined) {
      const utf8 = new TextEncoder().encode(name);
      const ptr = this.alloc(utf8.length, 1);
      new Uint8Array(this.exports.memory.buffer, ptr, utf8.length).set(utf8);
      r = this.rep(this.fn(`${IFACE}#[constructor]lock-name`)(ptr, utf8.length));
      this.locks.set(name, r);
    }
    return r;
  }

  /** A result area of `size` bytes at `ptr`, checked for alignment and bounds. */
  area(ptr, size) {
    const at = ptr >>> 0;
    if (at % 8 !== 0 || at + size > this.exports.memory.buffer.byteLength) throw new Error(`bad result pointer ${at}`);
    return at;
  }

  static policy(p) {
    const v = POLICY[p];
    if (v === undefined) throw new Error(`unknown policy ${p}`);
    return v;
  }

  /** The flat option<fence>: 5 values. */
  fence(f) {
    if (f == null) return [0, 0, 0n, 0, 0n];
    const seq = f.sequence ?? null;
    return [1, this.lock(f.lock), BigInt.asIntN(64, f.high_water), seq === null ? 0 : 1, BigInt.asIntN(64, seq ?? 0n)];
  }

  optionAt(v, at) {
    const d = v.getUint8(at);
    if (d > 1) throw new Error(`option discriminant ${d}`);
    return d === 1 ? v.getBigUint64(at + 8, true) : null;
  }

  admit(current, presented, policy) {
    const fence = this.fence(current);
    const lock = this.lock(presented.lock);
    const seq = presented.sequence ?? null;
    const ret = this.fn(`${IFACE}#admit`)(
      ...fence,
      lock,
      BigInt.asIntN(64, presented.token),
      seq === null ? 0 : 1,
      BigInt.asIntN(64, seq ?? 0n),
      CoreGuard.policy(policy),
    );
    const at = this.area(ret, 48);
    const v = this.view();
    const u64 = (o) => v.getBigUint64(at + o, true);
    const tag = v.getUint8(at);
    if (tag === 0) {
      return { verdict: 'admitted', high_water: u64(8), sequence: this.optionAt(v, at + 16), new_term: v.getUint8(at + 32) !== 0 };
    }
    if (tag !== 1) throw new Error(`result discriminant ${tag}`);
    const verdict = REJECTIONS[v.getUint8(at + 8)];
    if (verdict === undefined) throw new Error(`rejection case ${v.getUint8(at + 8)}`);
    if (verdict === 'stale_token' || verdict === 'token_reused') return { verdict, presented: u64(16), high_water: u64(24) };
    if (verdict === 'sequence_regressed') {
      return { verdict, token: u64(16), presented: this.optionAt(v, at + 24), last: u64(40) };
    }
    return { verdict };
  }

  /** Copies the verdict list opening the record at `at`. */
  codes(v, at) {
    const ptr = v.getUint32(at, true);
    const len = v.getUint32(at + 4, true);
    if (ptr + len > this.exports.memory.buffer.byteLength) throw new Error('verdict list out of bounds');
    return new Uint8Array(this.exports.memory.buffer.slice(ptr, ptr + len));
  }

  post(name, ret) {
    const f = this.exports[`cabi_post_${IFACE}#${name}`];
    if (typeof f === 'function') f(ret);
  }

  batch(current, lock, writes, policy) {
    const fence = this.fence(current);
    const rep = this.lock(lock);
    const ptr = this.alloc(writes.length * 24, 8);
    let v = this.view();
    writes.forEach((w, i) => {
      const seq = w.sequence ?? null;
      v.setBigUint64(ptr + i * 24, w.token, true);
      v.setBigUint64(ptr + i * 24 + 8, seq === null ? 0n : 1n, true);
      v.setBigUint64(ptr + i * 24 + 16, seq ?? 0n, true);
    });
    const ret = this.fn(`${IFACE}#admit-batch`)(...fence, rep, ptr, writes.length, CoreGuard.policy(policy));
    const at = this.area(ret, 40);
    v = this.view();
    const codes = this.codes(v, at);
    const d = v.getUint8(at + 8);
    if (d > 1) throw new Error(`option discriminant ${d}`);
    const out = { codes, fence: d === 0 ? null : { high_water: v.getBigUint64(at + 16, true), sequence: this.optionAt(v, at + 24) } };
    this.post('admit-batch', ret);
    return out;
  }

  stream(highWater, tokens, policy) {
    const ptr = this.alloc(tokens.length * 8, 8);
    let v = this.view();
    tokens.forEach((t, i) => v.setBigUint64(ptr + i * 8, t, true));
    const ret = this.fn(`${IFACE}#admit-stream`)(BigInt.asIntN(64, highWater), ptr, tokens.length, CoreGuard.policy(policy));
    const at = this.area(ret, 16);
    v = this.view();
    const out = { codes: this.codes(v, at), highWater: v.getBigUint64(at + 8, true) };
    this.post('admit-stream', ret);
    return out;
  }
}
