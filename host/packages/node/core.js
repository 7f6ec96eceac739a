// The engine of @fencing/guard: the core module of the fencing:guard
// component run by the platform's own WebAssembly (Node's or a browser's),
// with the canonical ABI lowered and lifted here, as docs/core-abi.md states
// it. No component-model runtime and no generated glue: a single decision is
// one call with scalar arguments (`admit-code`) and a scalar answer.
//
// This file trusts its caller (index.js) to have validated every value: u64
// values arrive as BigInt in 0..2^64-1. It checks everything that comes back
// from the module (pointers, lengths, discriminants), so a broken module
// fails the call, never misleads it.

export const IFACE = 'fencing:guard/check@0.3.0';
const I64_MAX = (1n << 63n) - 1n;
const TWO_64 = 1n << 64n;
/** Bytes of the slab that verdict lists are copied into (`Core.verdictSpace`). */
const SLAB_BYTES = 16 * 1024;

/** A u64 BigInt as the i64 bit pattern a core function takes. */
export const i64 = (v) => (v > I64_MAX ? v - TWO_64 : v);

/** LEB128 u32 at `p` of `bytes`: [value, next offset]. */
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

/**
 * The bytes of the one core module of component `bytes` that exports
 * `${IFACE}#admit-code`; throws if there is none or more than one.
 */
export function coreModuleBytes(bytes) {
  const header = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
  if (!header.every((b, i) => bytes[i] === b)) throw new Error('not a WebAssembly component binary');
  const found = [];
  let p = 8;
  while (p < bytes.length) {
    const id = bytes[p];
    const [size, start] = leb(bytes, p + 1);
    const payload = bytes.subarray(start, start + size);
    if (payload.length !== size) throw new Error('truncated component');
    if (id === 1) {
      const module = new WebAssembly.Module(payload);
      if (WebAssembly.Module.exports(module).some((e) => e.name === `${IFACE}#admit-code`)) found.push(payload);
    }
    p = start + size;
  }
  if (found.length !== 1) throw new Error(`expected one core module implementing ${IFACE}, found ${found.length}`);
  return found[0];
}

/** One instance of the core module and the lock names interned in it. */
export class Core {
  /** Instantiates `module` (a WebAssembly.Module from `coreModuleBytes`). */
  constructor(module) {
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
    const x = new WebAssembly.Instance(module, imports).exports;
    const fn = (name, required = true) => {
      const f = x[name];
      if (typeof f !== 'function' && required) throw new Error(`the module has no function ${name}`);
      return f;
    };
    /** Every export, for hosts that call more than this class wraps. */
    this.exports = x;
    this.memory = x.memory;
    if (!(this.memory instanceof WebAssembly.Memory)) throw new Error('the module exports no memory');
    this.realloc = fn('cabi_realloc');
    this.newLock = fn(`${IFACE}#[constructor]lock-name`);
    this.code = fn(`${IFACE}#admit-code`);
    this.batchFn = fn(`${IFACE}#admit-batch`);
    this.streamFn = fn(`${IFACE}#admit-stream`);
    this.postBatch = fn(`cabi_post_${IFACE}#admit-batch`, false);
    this.postStream = fn(`cabi_post_${IFACE}#admit-stream`, false);
    this.setKeysFn = fn(`${IFACE}#set-keys`);
    this.postSetKeys = fn(`cabi_post_${IFACE}#set-keys`, false);
    /** `admit-signed` with its twelve flat arguments: the verdict code. */
    this.signed = fn(`${IFACE}#admit-signed`);
    /** The Keys installed with `setKeys` (null: none yet). */
    this.keys = null;
    this.rep = rep;
    /** Lock name to its rep. */
    this.locks = new Map();
    /** The slab verdict lists are copied into, and how much of it is handed out. */
    this.slab = null;
    this.slabUsed = 0;
  }

  /** `cabi_realloc(0, 0, align, size)`, checked for alignment and bounds. */
  alloc(size, align) {
    const ptr = this.realloc(0, 0, align, size) >>> 0;
    if (ptr % align !== 0 || ptr + size > this.memory.buffer.byteLength) {
      throw new Error(`cabi_realloc returned ${ptr} for ${size} bytes`);
    }
    return ptr;
  }

  /** The rep of `name`'s lock-name, constructed on first use. */
  lock(name) {
    let r = this.locks.get(name);
    if (r === undefined) {
      const utf8 = new TextEncoder().encode(name);
      const ptr = this.alloc(utf8.length, 1);
      new Uint8Array(this.memory.buffer, ptr, utf8.length).set(utf8);
      r = this.rep(this.newLock(ptr, utf8.length));
      this.locks.set(name, r);
    }
    return r;
  }

  /** Copies `bytes` (a Uint8Array) into guest memory; its address. */
  bytesIn(bytes) {
    const ptr = this.alloc(bytes.length, 1);
    new Uint8Array(this.memory.buffer, ptr, bytes.length).set(bytes);
    return ptr;
  }

  /**
   * `set-keys` with `[id, algorithm case, material (Uint8Array)]` each: null
   * when installed, else `[key-error case, id]`.
   */
  setKeys(keys) {
    const materials = keys.map(([, , m]) => this.bytesIn(m));
    const ptr = this.alloc(keys.length * 16, 4);
    const view = new DataView(this.memory.buffer);
    keys.forEach(([id, algorithm, m], i) => {
      const at = ptr + 16 * i;
      for (let b = 0; b < 16; b++) view.setUint8(at + b, 0);
      view.setUint32(at, id, true);
      view.setUint8(at + 4, algorithm);
      view.setUint32(at + 8, materials[i], true);
      view.setUint32(at + 12, m.length, true);
    });
    const ret = this.setKeysFn(ptr, keys.length) >>> 0;
    if (ret % 4 !== 0 || ret + 12 > this.memory.buffer.byteLength) throw new Error(`bad result pointer ${ret}`);
    const out = new DataView(this.memory.buffer);
    const [disc, kase, id] = [out.getUint8(ret), out.getUint8(ret + 4), out.getUint32(ret + 8, true)];
    if (this.postSetKeys) this.postSetKeys(ret);
    if (disc === 0) return null;
    if (disc !== 1 || kase > 3) throw new Error(`set-keys answered discriminants ${disc}, ${kase}`);
    return [kase, id];
  }

  /**
   * Views of guest memory as it is now: a memory that grew has a new buffer,
   * so the views are made again after any call that may have grown it.
   */
  views() {
    const buffer = this.memory.buffer;
    if (this.buffer !== buffer) {
      this.buffer = buffer;
      this.u8 = new Uint8Array(buffer);
      this.u32 = new Uint32Array(buffer);
      this.u64 = new BigUint64Array(buffer);
    }
    return this;
  }

  /** A result record of `size` bytes at `ptr`, checked for alignment (8) and bounds. */
  record(ptr, size) {
    const at = ptr >>> 0;
    if (at % 8 !== 0 || at + size > this.views().u8.length) throw new Error(`bad result pointer ${at}`);
    return at;
  }

  /** The `list<u8>` whose pointer and length open the record at `at`, copied out. */
  verdictBytes(at, expected) {
    const m = this.views();
    const ptr = m.u32[at >>> 2];
    const len = m.u32[(at >>> 2) + 1];
    if (len !== expected) throw new Error(`the module returned ${len} verdicts for ${expected} inputs`);
    if (ptr + len > m.u8.length) throw new Error('verdict list out of bounds');
    const codes = this.verdictSpace(len);
    codes.set(m.u8.subarray(ptr, ptr + len));
    return codes;
  }

  /**
   * `len` bytes of their own for a call's verdicts: a view of a shared slab,
   * handed out once each, so that copying a stream's or a batch's verdicts
   * out of the instance does not allocate an `ArrayBuffer` every call (that
   * allocation cost more than the copy). Lists over a quarter of a slab get
   * their own buffer. An outcome kept keeps its slab alive: at most
   * `SLAB_BYTES` for a small one.
   */
  verdictSpace(len) {
    if (len > SLAB_BYTES / 4) return new Uint8Array(len);
    if (this.slab === null || this.slabUsed + len > SLAB_BYTES) {
      this.slab = new Uint8Array(SLAB_BYTES);
      this.slabUsed = 0;
    }
    const at = this.slabUsed;
    this.slabUsed = at + len;
    return this.slab.subarray(at, at + len);
  }

  /**
   * `admit-batch`: `fence` is the flat `option<fence>` [some, rep,
   * high-water, sequence some, sequence] (i64 values already converted),
   * and `lay(m, at)` writes the `list<batch-write>` of `n` writes into the
   * views `m` from 8-byte word `at` on: three words a write (token, sequence
   * discriminant, sequence); `lay` writes every token and discriminant (the
   * memory is not cleared first), and a sequence where its discriminant is 1.
   * Returns the verdict bytes and the fence state after the batch.
   */
  batch(fence, rep, n, policy, lay) {
    const ptr = this.alloc(n * 24, 8);
    const m = this.views();
    lay(m, ptr >>> 3);
    const ret = this.batchFn(fence[0], fence[1], fence[2], fence[3], fence[4], rep, ptr, n, policy);
    const at = this.record(ret, 40);
    const codes = this.verdictBytes(at, n);
    const after = this.views(); // the call may have grown the memory
    const some = after.u8[at + 8];
    if (some > 1) throw new Error(`option discriminant ${some}`);
    const state = some === 0 ? null : { highWater: after.u64[(at + 16) >>> 3], sequence: optionAt(after, at + 24) };
    if (this.postBatch) this.postBatch(ret);
    return { codes, state };
  }

  /** `admit-stream` over `tokens` (a BigUint64Array): the verdict bytes and the mark after. */
  stream(highWater, tokens, policy) {
    const n = tokens.length;
    const ptr = this.alloc(n * 8, 8);
    this.views().u64.set(tokens, ptr >>> 3);
    const ret = this.streamFn(i64(highWater), ptr, n, policy);
    const at = this.record(ret, 16);
    const codes = this.verdictBytes(at, n);
    const mark = this.views().u64[(at + 8) >>> 3];
    if (this.postStream) this.postStream(ret);
    return { codes, highWater: mark };
  }
}

/** An `option<u64>` at `at` (8-aligned) in the views `m`: discriminant byte, value 8 bytes later. */
function optionAt(m, at) {
  const d = m.u8[at];
  if (d > 1) throw new Error(`option discriminant ${d}`);
  return d === 1 ? m.u64[(at + 8) >>> 3] : null;
}
