// The shared argument vectors (tests/vectors/arguments, format in
// tests/vectors/README.md) through the package's own entry points: it must
// refuse exactly the cases the file refuses, with a RangeError whose `code`
// is the rule's (and ends its message), and take every other one.
//
// What the package takes, and so which cases run:
// - name: the `text` cases, as the lock of a fence, of a sequencer, of a
//   batch, of columns and of a signed write, and through `checkName`. The
//   `bytes_hex` cases are skipped: names are JavaScript strings, never bytes;
// - policy: every case, as the policy of admit, admitBatch, admitStream and admitSigned;
// - number: tokens are BigInts, not text. A case whose text is decimal digits
//   runs as the BigInt it spells (ok, or number_too_large above 2^64-1); the
//   other refusals (a sign, a space, a leading zero) are about text the
//   package never takes, and are skipped;
// - from_signed: the value as a BigInt token, and as a Number when it is a
//   safe integer (number_negative below 0);
// - to_signed: skipped: the package hands no token to a signed 64-bit integer;
// - proof: proofs are Uint8Arrays. A case whose text is hex runs as its bytes
//   (ok, or proof_too_long past 256 bytes); proof_not_hex cases are about text
//   and are skipped.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Guard, Keys, checkName } from '../index.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const vectors = join(root, 'tests', 'vectors');

/** Parses with every integer literal as a BigInt (values reach 2^64-1 and -2^63). */
const parse = (text) => JSON.parse(text.replace(/(?<=[:\[,]\s*)(-?\d+)(?=\s*[,\]}])/g, '"$1n"'), (_, v) =>
  typeof v === 'string' && /^-?\d+n$/.test(v) ? BigInt(v.slice(0, -1)) : v);

const cases = parse(readFileSync(join(vectors, 'arguments', 'arguments.json'), 'utf8')).cases;
const proofs = parse(readFileSync(join(vectors, 'proofs', 'signed.json'), 'utf8'));
const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
const key = proofs.keys['ed-7'];
const keys = new Keys([{ id: Number(key.id), algorithm: key.algorithm, material: hex(key.material) }]);
// One guard for every case: a refused name is never interned, so each entry point checks it again.
const guard = new Guard();

const text = (c) => c.text.repeat(Number(c.repeat ?? 1n));

/** `call` throws the rule's refusal: a RangeError with `code`, named at the end of its message. */
function refused(call, code, name) {
  assert.throws(call, (e) => {
    assert.ok(e instanceof RangeError, `${name}: ${e}`);
    assert.equal(e.code, code, `${name}: ${e.message}`);
    assert.ok(e.message.endsWith(`(${code})`), `${name}: ${e.message}`);
    return true;
  });
}

/** True for a case of a kind, or a form, the package does not take (see the file's head). */
function skipped(c) {
  switch (c.kind) {
    case 'name':
      return 'bytes_hex' in c;
    case 'number':
      return !/^[0-9]+$/.test(text(c)) || !['ok', 'number_too_large'].includes(c.expect);
    case 'proof':
      return c.expect === 'proof_not_hex';
    default:
      return c.kind === 'to_signed';
  }
}

function runName(c) {
  const name = text(c);
  const entryPoints = [
    () => guard.admit(null, { lock: name, token: 1n }),
    () => guard.admit({ lock: name, highWater: 1n }, { lock: 'other', token: 2n }),
    () => guard.admitBatch({ lock: 'other', highWater: 1n }, name, [2n]),
    () => guard.admitColumns(null, name, [1n]),
    () => guard.admitSigned(null, { lock: name, token: 1n }, new Uint8Array(), keys),
  ];
  if (c.expect !== 'ok') {
    refused(() => checkName(name), c.expect, c.name);
    for (const call of entryPoints) refused(call, c.expect, c.name);
    return;
  }
  assert.equal(checkName(name), name);
  assert.deepEqual(guard.admit({ lock: name, highWater: 1n }, { lock: name, token: 1n }), {
    admitted: true, highWater: 1n, sequence: null, newTerm: false,
  });
  for (const call of entryPoints) call();
}

function runPolicy(c) {
  const policy = text(c);
  const fence = { lock: 'l', highWater: 5n };
  const entryPoints = [
    () => guard.admit(fence, { lock: 'l', token: 5n }, policy),
    () => guard.admitBatch(fence, 'l', [5n], policy),
    () => guard.admitStream(5n, [5n], policy),
    () => guard.admitSigned(null, { lock: 'l', token: 5n }, new Uint8Array(), keys, policy),
  ];
  if (c.expect !== 'ok') {
    for (const call of entryPoints) refused(call, c.expect, c.name);
    return;
  }
  const reuse = guard.admit(fence, { lock: 'l', token: 5n }, policy);
  assert.equal(reuse.admitted, c.value === 'non-decreasing', c.name);
  for (const call of entryPoints) call();
}

function runToken(c, value) {
  const entryPoints = [
    () => guard.admit(null, { lock: 'l', token: value }),
    () => guard.admit(null, { lock: 'l', token: 1n, sequence: value }),
    () => guard.admit({ lock: 'l', highWater: value }, { lock: 'l', token: 1n }),
    () => guard.admitBatch(null, 'l', [value]),
    () => guard.admitColumns(null, 'l', [1n], [value]),
    () => guard.admitStream(value, [1n]),
  ];
  if (c.expect !== 'ok') {
    for (const call of entryPoints) refused(call, c.expect, c.name);
    return;
  }
  const d = guard.admit(null, { lock: 'l', token: value });
  const big = BigInt(value);
  assert.deepEqual(d, big === 0n ? { admitted: false, reason: 'invalid_token' } : { admitted: true, highWater: big, sequence: null, newTerm: true });
  for (const call of entryPoints) call();
}

function runProof(c) {
  const proof = hex(text(c));
  const call = () => guard.admitSigned(null, { lock: 'l', token: 1n }, proof, keys);
  if (c.expect !== 'ok') {
    refused(call, c.expect, c.name);
    return;
  }
  // Taken: the proof is the component's to judge (empty: missing; these bytes: not a proof).
  assert.ok(['proof_missing', 'proof_malformed'].includes(call().reason), c.name);
}

test('every argument vector the package takes gets its verdict', () => {
  let ran = 0;
  const skips = {};
  for (const c of cases) {
    if (skipped(c)) {
      skips[c.kind] = (skips[c.kind] ?? 0) + 1;
      continue;
    }
    switch (c.kind) {
      case 'name':
        runName(c);
        break;
      case 'policy':
        runPolicy(c);
        break;
      case 'number':
        runToken(c, BigInt(text(c)));
        break;
      case 'from_signed':
        runToken(c, c.value);
        if (c.value >= BigInt(Number.MIN_SAFE_INTEGER) && c.value <= BigInt(Number.MAX_SAFE_INTEGER)) runToken(c, Number(c.value));
        break;
      case 'proof':
        runProof(c);
        break;
      default:
        assert.fail(`unknown kind ${c.kind}`);
    }
    ran++;
  }
  console.log(`argument vectors: ${ran} passed, ${cases.length - ran} skipped (${JSON.stringify(skips)}), 0 failed`);
  assert.ok(ran >= 45, `${ran} cases ran`);
  for (const kind of ['name', 'policy', 'number', 'from_signed', 'proof']) {
    const ran = cases.filter((c) => c.kind === kind && !skipped(c));
    assert.ok(ran.some((c) => c.expect === 'ok') && ran.some((c) => c.expect !== 'ok'), kind);
  }
});
