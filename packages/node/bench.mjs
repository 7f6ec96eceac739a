// What one call through the package costs, admitted and refused, beside the
// same call on the core-ABI host (tests/node/core_abi.mjs). Prints medians of
// 9 rounds of 20,000 calls each, in µs per call.
//
// Usage: node bench.mjs   (after npm run build)
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Guard } from './index.js';
import { CoreGuard } from '../../tests/node/core_abi.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const wasm = process.env.FENCING_GUARD_WASM ?? resolve(here, '..', '..', 'target', 'wasm32-wasip2', 'release', 'fencing_rules.wasm');
const N = 20_000;
const ROUNDS = 9;

function median(f) {
  for (let i = 0; i < N; i++) f(); // warm up
  const times = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < N; i++) f();
    times.push(Number(process.hrtime.bigint() - start) / N / 1000);
  }
  return times.sort((a, b) => a - b)[ROUNDS >> 1];
}

const guard = new Guard();
const core = new CoreGuard(readFileSync(wasm));
const fence = { lock: 'orders', highWater: 34n };
const fenceCore = { lock: 'orders', high_water: 34n };
const rows = [
  ['package (jco), admitted', () => guard.admit(fence, { lock: 'orders', token: 35n })],
  ['package (jco), refused', () => guard.admit(fence, { lock: 'orders', token: 33n })],
  ['core ABI by hand, admitted', () => core.admit(fenceCore, { lock: 'orders', token: 35n }, 'non_decreasing')],
  ['core ABI by hand, refused', () => core.admit(fenceCore, { lock: 'orders', token: 33n }, 'non_decreasing')],
];
console.log(`node ${process.version}, median of ${ROUNDS} rounds x ${N} calls`);
for (const [name, f] of rows) console.log(`${name.padEnd(28)} ${median(f).toFixed(2)} µs/call`);
