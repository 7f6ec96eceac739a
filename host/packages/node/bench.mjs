// What a call through the package costs on this machine: one decision
// admitted and refused, and per element of a batch and a stream of 1,024
// (the inputs of the Rust runtime's `check` benchmark: a mostly advancing
// mix with some stale writes). A batch is timed as write objects and as
// columns (two BigUint64Arrays), each call reading the outcome's fence, and
// again reading every verdict (built on first read); a stream reading its
// mark, and every verdict. Prints the median of
// 9 rounds, each the mean over enough calls to run at least 50 ms.
//
// Usage: node bench.mjs   (after npm run build)
import { Guard } from './index.js';

const ROUNDS = 9;

function median(f, elements = 1) {
  let n = 1;
  for (let start = performance.now(); performance.now() - start < 50; n *= 2) for (let i = 0; i < n; i++) f(); // warm up, size
  const times = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) f();
    times.push(Number(process.hrtime.bigint() - start) / n / elements);
  }
  return times.sort((a, b) => a - b)[ROUNDS >> 1];
}

const guard = new Guard();
const fence = { lock: 'orders', highWater: 34n };
const LOCK = 'storage:customer-orders-bucket';
const batchFence = { lock: LOCK, highWater: 1000n, sequence: 7n };
const writes = Array.from({ length: 1024 }, (_, i) => ({
  token: 1000n + BigInt(i >> 2) - (i % 16 === 5 ? 3n : 0n),
  sequence: BigInt(i),
}));
const tokens = BigUint64Array.from({ length: 1024 }, (_, i) => 1000n + BigInt(i >> 1) - (i % 16 === 5 ? 3n : 0n));
const tokenArray = Array.from(tokens);
const columns = [BigUint64Array.from(writes, (w) => w.token), BigUint64Array.from(writes, (w) => w.sequence)];
const summary = (out) => out.fence ?? out.highWater;
const rows = [
  ['admit, admitted', 'µs/call', 1e3, () => guard.admit(fence, { lock: 'orders', token: 35n })],
  ['admit, refused', 'µs/call', 1e3, () => guard.admit(fence, { lock: 'orders', token: 33n })],
  ['admitBatch, 1,024 writes', 'ns/write', 1, () => summary(guard.admitBatch(batchFence, LOCK, writes)), 1024],
  ['  and every verdict read', 'ns/write', 1, () => guard.admitBatch(batchFence, LOCK, writes).verdicts, 1024],
  ['admitColumns, 1,024 writes', 'ns/write', 1, () => summary(guard.admitColumns(batchFence, LOCK, ...columns)), 1024],
  ['  and every verdict read', 'ns/write', 1, () => guard.admitColumns(batchFence, LOCK, ...columns).verdicts, 1024],
  ['admitStream, 1,024 (BigUint64Array)', 'ns/token', 1, () => summary(guard.admitStream(999n, tokens)), 1024],
  ['  and every verdict read', 'ns/token', 1, () => guard.admitStream(999n, tokens).verdicts, 1024],
  ['admitStream, 1,024 (Array)', 'ns/token', 1, () => summary(guard.admitStream(999n, tokenArray)), 1024],
];
console.log(`node ${process.version}, median of ${ROUNDS} rounds`);
for (const [name, unit, scale, f, elements] of rows) {
  console.log(`${name.padEnd(38)} ${(median(f, elements) / scale).toFixed(scale === 1 ? 1 : 3)} ${unit}`);
}
