// Signed writes through `Guard.admitSigned`: every shared proof vector
// (tests/vectors/proofs), a remembered proof refusing a changed byte, keys
// the component refuses, and bad arguments.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Guard, Keys } from '../index.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const dir = join(root, 'tests', 'vectors', 'proofs');

/** Parses with every integer literal as a BigInt (tokens reach 2^64-1). */
const parse = (text) => JSON.parse(text.replace(/(?<=[:\[,]\s*)(-?\d+)(?=\s*[,\]}])/g, '"$1n"'), (_, v) =>
  typeof v === 'string' && /^-?\d+n$/.test(v) ? BigInt(v.slice(0, -1)) : v);

const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));

function keys(file, names) {
  return new Keys(names.map((n) => {
    const k = file.keys[n];
    return { id: Number(k.id), algorithm: k.algorithm, material: hex(k.material) };
  }));
}

function expected(e) {
  switch (e.verdict) {
    case 'admitted':
      return { admitted: true, highWater: e.high_water, sequence: e.sequence ?? null, newTerm: e.new_term };
    case 'stale_token':
      return { admitted: false, reason: e.verdict, presented: e.presented, highWater: e.high_water };
    case 'proof_unknown_key':
      return { admitted: false, reason: e.verdict, keyId: Number(e.key_id) };
    default:
      return { admitted: false, reason: e.verdict };
  }
}

const files = readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => parse(readFileSync(join(dir, f), 'utf8')));

test('every shared proof vector', () => {
  const guard = new Guard();
  let n = 0;
  for (const file of files) {
    for (const c of file.cases) {
      const fence = c.fence === null ? null : { lock: c.fence.lock, highWater: c.fence.high_water, sequence: c.fence.sequence };
      const presented = { lock: c.sequencer.lock, token: c.sequencer.token, sequence: c.sequencer.sequence };
      const got = guard.admitSigned(fence, presented, hex(c.proof.hex), keys(file, c.verifier), c.policy.replace('_', '-'));
      assert.deepEqual(got, expected(c.expect), c.name);
      n++;
    }
  }
  assert.ok(n >= 20, `${n} cases`);
});

test('a remembered proof still refuses a changed byte', () => {
  const file = files[0];
  const c = file.cases.find((x) => x.name === 'signed-first-write-ed25519');
  const k = keys(file, c.verifier);
  const proof = hex(c.proof.hex);
  const presented = { lock: c.sequencer.lock, token: c.sequencer.token };
  const guard = new Guard();
  assert.equal(guard.admitSigned(null, presented, proof, k).admitted, true);
  assert.equal(guard.admitSigned({ lock: presented.lock, highWater: presented.token }, presented, proof, k).admitted, true);
  const changed = proof.slice();
  changed[changed.length - 1] ^= 1;
  assert.deepEqual(guard.admitSigned(null, presented, changed, k), { admitted: false, reason: 'proof_bad' });
});

test('keys the component refuses, and bad arguments', () => {
  const guard = new Guard();
  const presented = { lock: 'orders', token: 34n };
  const mac = (id, n) => ({ id, algorithm: 'hmac-sha256', material: new Uint8Array(n).fill(7) });
  assert.throws(() => guard.admitSigned(null, presented, new Uint8Array(), new Keys([mac(3, 16)])), /key 3 is not a key of its algorithm/);
  assert.throws(() => guard.admitSigned(null, presented, new Uint8Array(), new Keys([mac(1, 32), mac(1, 32)])), /two keys have id 1/);
  assert.throws(() => guard.admitSigned(null, presented, new Uint8Array(), new Keys([])), /no keys given/);
  assert.throws(() => new Keys([{ id: 1, algorithm: 'rsa', material: new Uint8Array(32) }]), /algorithm/);
  assert.throws(() => new Keys([{ id: -1, algorithm: 'ed25519', material: new Uint8Array(32) }]), /id/);
  const good = new Keys([mac(1, 32)]);
  assert.throws(() => guard.admitSigned(null, presented, 'abc', good), /proof must be a Uint8Array/);
  assert.throws(() => guard.admitSigned(null, presented, new Uint8Array(), [good]), /keys must be a Keys/);
  // After a refused set the guard still decides with good keys.
  assert.deepEqual(guard.admitSigned(null, presented, new Uint8Array(), good), { admitted: false, reason: 'proof_missing' });
});
