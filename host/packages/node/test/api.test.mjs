// The package's own promises: refusals are values, bad values never cross.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Guard, U64_MAX, checkName } from '../index.js';

const guard = new Guard();

test('the GC-pause story: 34 writes, the paused holder with 33 refused', () => {
  let fence = null;
  for (let t = 1n; t <= 34n; t++) {
    const d = guard.admit(fence, { lock: 'orders', token: t });
    assert.equal(d.admitted, true);
    fence = { lock: 'orders', highWater: d.highWater, sequence: d.sequence };
  }
  assert.deepEqual(guard.admit(fence, { lock: 'orders', token: 33n }), {
    admitted: false,
    reason: 'stale_token',
    presented: 33n,
    highWater: 34n,
  });
});

test('out-of-range and loose values are refused before they cross', () => {
  const fence = { lock: 'l', highWater: 5n };
  const bad = [
    [() => guard.admit(fence, { lock: 'l', token: -1n }), RangeError, /presented.token/],
    [() => guard.admit(fence, { lock: 'l', token: 1n << 64n }), RangeError, /presented.token/],
    [() => guard.admit(fence, { lock: 'l', token: 2 ** 53 }), RangeError, /presented.token/],
    [() => guard.admit(fence, { lock: 'l', token: 1.5 }), RangeError, /presented.token/],
    [() => guard.admit(fence, { lock: 'l', token: null }), TypeError, /presented.token/],
    [() => guard.admit(fence, { lock: 'l', token: '7' }), TypeError, /presented.token/],
    [() => guard.admit(fence, { lock: 'l', token: 7n, sequence: -2n }), RangeError, /presented.sequence/],
    [() => guard.admit({ lock: 'l', highWater: -1n }, { lock: 'l', token: 7n }), RangeError, /current.highWater/],
    [() => guard.admit(fence, { lock: 7, token: 7n }), TypeError, /presented.lock/],
    [() => guard.admit(fence, { lock: '\ud800', token: 7n }), RangeError, /presented.lock/],
    [() => guard.admit(fence, { lock: 'l', token: 7n }, 'newest'), RangeError, /policy/],
    [() => guard.admitBatch(fence, 'l', [1n, { token: -3n }]), RangeError, /writes\[1\].token/],
    [() => guard.admitStream(0n, [1n, U64_MAX + 1n]), RangeError, /tokens\[1\]/],
    [() => guard.admitStream(0n, [1n, true]), TypeError, /tokens\[1\]/],
    [() => guard.admitBatch(fence, 'l', [{ token: 6n, sequence: -1 }]), RangeError, /writes\[0\].sequence/],
    [() => guard.admitBatch(fence, 'l', [{ token: 6n, sequence: 1n << 64n }]), RangeError, /writes\[0\].sequence/],
    [() => guard.admitBatch(fence, 'l', [6n, '7']), TypeError, /writes\[1\]/],
  ];
  for (const [call, type, words] of bad) assert.throws(call, (e) => e instanceof type && words.test(e.message));
  // The rule's codes travel with the refusals that have one.
  assert.throws(bad[0][0], (e) => e.code === 'number_negative' && e.message.endsWith('(number_negative)'));
  assert.throws(bad[1][0], (e) => e.code === 'number_too_large' && e.message.endsWith('(number_too_large)'));
  assert.throws(bad[9][0], (e) => e.code === 'name_not_utf8');
  assert.throws(bad[10][0], (e) => e.code === 'policy_unknown');
  // Nothing crossed: the fence the caller holds still admits its holder and refuses the stale.
  assert.equal(guard.admit(fence, { lock: 'l', token: 5n }).admitted, true);
  assert.equal(guard.admit(fence, { lock: 'l', token: 4n }).reason, 'stale_token');
});

test('u64 edges cross exactly, safe Numbers are accepted', () => {
  assert.deepEqual(guard.admit({ lock: 'l', highWater: U64_MAX - 1n }, { lock: 'l', token: U64_MAX }), {
    admitted: true,
    highWater: U64_MAX,
    sequence: null,
    newTerm: true,
  });
  assert.equal(guard.admit({ lock: 'l', highWater: 2 ** 53 - 1 }, { lock: 'l', token: (1n << 53n) + 1n }).highWater, (1n << 53n) + 1n);
});

test('lock names compare as bytes', () => {
  assert.equal(guard.admit({ lock: 'caf\u00e9', highWater: 1n }, { lock: 'cafe\u0301', token: 2n }).reason, 'wrong_lock');
  assert.equal(guard.admit({ lock: 'Orders', highWater: 1n }, { lock: 'orders', token: 2n }).reason, 'wrong_lock');
});

test('a name the rule refuses is refused wherever it is given, every time', () => {
  // A NUL inside a name is refused, never compared or truncated at; a refused name is never interned.
  const calls = [
    (n) => guard.admit({ lock: n, highWater: 1n }, { lock: 'a', token: 2n }),
    (n) => guard.admit({ lock: 'a', highWater: 1n }, { lock: n, token: 2n }),
    (n) => guard.admit(null, { lock: n, token: 2n }),
    (n) => guard.admitBatch(null, n, [1n]),
    (n) => guard.admitColumns({ lock: n, highWater: 1n }, 'a', [2n]),
  ];
  for (const call of [...calls, ...calls]) {
    assert.throws(() => call('a\u0000b'), (e) => e instanceof RangeError && e.code === 'name_control'
      && e.message.endsWith('contains control character U+0000 (name_control)'));
  }
  assert.equal(checkName('a b'), 'a b');
  assert.throws(() => checkName('a '), (e) => e.code === 'name_whitespace');
  // String.prototype.trim's white space is not Unicode's: U+FEFF begins a name.
  assert.equal(checkName('\ufefforders'), '\ufefforders');
});

test('policies by the contract\'s names only', () => {
  const fence = { lock: 'l', highWater: 5n };
  assert.equal(guard.admit(fence, { lock: 'l', token: 5n }, 'strictly-increasing').reason, 'token_reused');
  assert.equal(guard.admit(fence, { lock: 'l', token: 5n }, 'non-decreasing').admitted, true);
  assert.equal(guard.admit(fence, { lock: 'l', token: 5n }).admitted, true);
  for (const other of ['strictly_increasing', 'non_decreasing', 'Non-Decreasing', 5]) {
    assert.throws(() => guard.admit(fence, { lock: 'l', token: 5n }, other), (e) => e instanceof RangeError && e.code === 'policy_unknown');
  }
});

test('a guard with room for two names re-interns correctly', () => {
  const small = new Guard({ maxLocks: 2 });
  for (let i = 1; i < 200; i++) {
    const lock = `lock-${i % 7}`;
    assert.equal(small.admit({ lock, highWater: 10n }, { lock, token: 9n }).reason, 'stale_token');
    assert.equal(small.admit({ lock, highWater: 10n }, { lock: `${lock}x`, token: 11n }).reason, 'wrong_lock');
  }
  assert.throws(() => new Guard({ maxLocks: 1 }), RangeError);
});

test('every shape of batch decides as one admit per write', () => {
  // Bare BigInts and safe Numbers, writes with and without sequences, a mix, u64 edges.
  let seed = 7;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
  const shapes = [
    Array.from({ length: 200 }, () => BigInt(1 + rand(40))),
    Array.from({ length: 200 }, () => 1 + rand(40)),
    Array.from({ length: 200 }, () => ({ token: BigInt(1 + rand(40)), sequence: BigInt(rand(5)) })),
    Array.from({ length: 200 }, () => (rand(2) ? BigInt(rand(40)) : { token: rand(40), sequence: rand(2) ? null : 2 })),
    [U64_MAX - 1n, { token: U64_MAX, sequence: U64_MAX }, U64_MAX, { token: U64_MAX, sequence: 0n }, 0n],
  ];
  const starts = [null, { lock: 'l', highWater: 20n }, { lock: 'l', highWater: 20n, sequence: 1n }, { lock: 'other', highWater: 20n }];
  for (const writes of shapes) {
    for (const start of starts) {
      const out = guard.admitBatch(start, 'l', writes);
      assert.equal(out.verdicts.length, writes.length);
      let fence = start;
      writes.forEach((w, i) => {
        const presented = typeof w === 'object' ? { lock: 'l', ...w } : { lock: 'l', token: w };
        const one = guard.admit(fence, presented);
        assert.deepEqual(out.verdicts[i], one, `write ${i} from ${JSON.stringify(start, (k, v) => (typeof v === 'bigint' ? `${v}` : v))}`);
        if (one.admitted) fence = { lock: 'l', highWater: one.highWater, sequence: one.sequence };
      });
    }
  }
});

test('columns decide as the batch of the same writes; counts agree with the verdicts', () => {
  let seed = 11;
  const rand = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % n);
  const tokens = Array.from({ length: 300 }, () => BigInt(rand(40)));
  const sequences = Array.from({ length: 300 }, () => BigInt(rand(5)));
  const starts = [null, { lock: 'l', highWater: 20n }, { lock: 'l', highWater: 20n, sequence: 1n }, { lock: 'other', highWater: 20n }];
  const plain = (out) => ({ verdicts: out.verdicts, fence: out.fence, admitted: out.admitted, count: out.admittedCount });
  for (const start of starts) {
    const withSeq = plain(guard.admitBatch(start, 'l', tokens.map((token, i) => ({ token, sequence: sequences[i] }))));
    const without = plain(guard.admitBatch(start, 'l', tokens));
    assert.deepEqual(plain(guard.admitColumns(start, 'l', BigUint64Array.from(tokens), BigUint64Array.from(sequences))), withSeq);
    assert.deepEqual(plain(guard.admitColumns(start, 'l', tokens, sequences)), withSeq);
    assert.deepEqual(plain(guard.admitColumns(start, 'l', BigUint64Array.from(tokens))), without);
    for (const out of [withSeq, without]) {
      assert.deepEqual(out.admitted, out.verdicts.map((v) => v.admitted));
      assert.equal(out.count, out.admitted.filter(Boolean).length);
      assert.equal(out.count > 0, start === null || start.lock === 'l');
    }
  }
  // The outcome keeps its own copy of the writes: changing the caller's arrays changes nothing.
  const [ts, ss] = [BigUint64Array.of(4n, 2n), BigUint64Array.of(1n, 1n)];
  const copied = guard.admitColumns({ lock: 'l', highWater: 3n }, 'l', ts, ss);
  ts[0] = 1n;
  ss[0] = 9n;
  assert.deepEqual(copied.verdicts[0], { admitted: true, highWater: 4n, sequence: 1n, newTerm: true });
  assert.equal(copied.verdicts[1].reason, 'stale_token');
  const stream = guard.admitStream(5n, [6n, 4n, 6n, 0n]);
  assert.equal(stream.admittedCount, 2);
  assert.deepEqual(stream.verdicts, ['admitted', 'stale_token', 'admitted', 'invalid_token']);
});

test('an outcome keeps its verdicts while later calls answer, across many calls', () => {
  // Verdicts are copied out of the instance into shared space, a part of it
  // per call: reading an early outcome after thousands of later ones (more
  // than that space holds), of every size, must give its own answer.
  const kept = [];
  for (let i = 0; i < 3000; i++) {
    const n = 1 + (i % 97) * ((i % 7) + 1);
    const tokens = BigUint64Array.from({ length: n }, (_, j) => BigInt((i + j) % 3));
    kept.push([tokens, guard.admitStream(1n, tokens)]);
  }
  kept.push([new BigUint64Array(20000).fill(2n), guard.admitStream(1n, new BigUint64Array(20000).fill(2n))]);
  for (const [tokens, out] of kept) {
    let mark = 1n;
    const expected = Array.from(tokens, (t) => {
      if (t === 0n) return 'invalid_token';
      if (t < mark) return 'stale_token';
      mark = t;
      return 'admitted';
    });
    assert.deepEqual(out.verdicts, expected);
  }
});

test('bad columns are refused naming the value', () => {
  for (const [call, error, words] of [
    [() => guard.admitColumns(null, 'l', [1n, -1n]), RangeError, /tokens\[1\]/],
    [() => guard.admitColumns(null, 'l', [1n, 2n], [0n, 1n << 64n]), RangeError, /sequences\[1\]/],
    [() => guard.admitColumns(null, 'l', [1n, true]), TypeError, /tokens\[1\]/],
    [() => guard.admitColumns(null, 'l', [1n, 2n], [1n]), RangeError, /sequences has 1 values for 2 tokens/],
    [() => guard.admitColumns(null, 'l', '12'), TypeError, /tokens must be an array/],
  ]) {
    assert.throws(call, error);
    assert.throws(call, words);
  }
});

test('a batch or stream answer that cannot be the writes fails closed', () => {
  const g = new Guard();
  const batch = g.core.batch.bind(g.core);
  // A fence after the batch that no admitted write left: refused before the outcome exists.
  g.core.batch = (...args) => ({ ...batch(...args), state: { highWater: 99n, sequence: null } });
  assert.throws(() => g.admitBatch(null, 'l', [1n, 2n]), /not the last admitted write/);
  // An unknown code before the last admission: refused when the codes are read.
  g.core.batch = (...args) => {
    const out = batch(...args);
    out.codes[0] = 9;
    return out;
  };
  const out = g.admitBatch(null, 'l', [1n, 2n]);
  assert.equal(out.fence.highWater, 2n);
  assert.throws(() => out.verdicts, /unknown verdict code 9/);
  assert.throws(() => out.admittedCount, /verdict code 9/);
  const stream = g.core.stream.bind(g.core);
  g.core.stream = (...args) => ({ ...stream(...args), highWater: 7n });
  assert.throws(() => g.admitStream(0n, [1n, 2n]), /the module left the mark 7/);
});

test('a memory that grows during the call is read through its new buffer', () => {
  const g = new Guard();
  // The module may grow its memory while it decides; the answer is read after.
  for (const name of ['batchFn', 'streamFn']) {
    const call = g.core[name];
    g.core[name] = (...args) => {
      const ret = call(...args);
      g.core.memory.grow(1);
      return ret;
    };
  }
  const out = g.admitBatch({ lock: 'l', highWater: 3n, sequence: 1n }, 'l', [{ token: 4n, sequence: 2n }, 2n]);
  assert.deepEqual(out.fence, { highWater: 4n, sequence: 2n });
  assert.equal(out.admittedCount, 1);
  assert.equal(g.admitStream(3n, [4n, 2n]).highWater, 4n);
});
