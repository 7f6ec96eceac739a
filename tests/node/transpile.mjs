// Transpiles the fencing:guard component into JavaScript + core Wasm with jco,
// into tests/node/out/ (gitignored), for run_vectors.mjs to import.
//
// Usage: node transpile.mjs [FILE]
//   FILE defaults to $FENCING_GUARD_WASM, else
//   target/wasm32-wasip2/release/fencing_guest.wasm under the repository root.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const wasm = resolve(
  process.argv[2] ?? process.env.FENCING_GUARD_WASM ?? join(root, 'target', 'wasm32-wasip2', 'release', 'fencing_guest.wasm'),
);
const out = join(here, 'out');

if (!existsSync(wasm)) {
  console.error(`error: no component at ${wasm} (cargo build -p fencing-guest --target wasm32-wasip2 --release)`);
  process.exit(2);
}
// A stale output from an older component must never be run by mistake.
rmSync(out, { recursive: true, force: true });
const jco = join(here, 'node_modules', '.bin', 'jco');
const run = spawnSync(jco, ['transpile', wasm, '-o', out, '--name', 'fencing_guest', '--no-typescript', '--quiet'], {
  stdio: 'inherit',
});
if (run.error) {
  console.error(`error: cannot run ${jco}: ${run.error.message} (run npm ci in tests/node)`);
  process.exit(2);
}
process.exit(run.status ?? 1);
