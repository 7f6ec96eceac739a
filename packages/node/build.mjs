// Builds the package's dist/: the fencing:guard component transpiled by jco
// (the JavaScript glue and the core module beside it).
//
// Usage: node build.mjs [FILE]
//   FILE defaults to $FENCING_GUARD_WASM, else the repository's release build,
//   target/wasm32-wasip2/release/fencing_rules.wasm (cargo build -p
//   fencing-rules --target wasm32-wasip2 --release).
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const wasm = resolve(
  process.argv[2] ?? process.env.FENCING_GUARD_WASM ?? join(root, 'target', 'wasm32-wasip2', 'release', 'fencing_rules.wasm'),
);
if (!existsSync(wasm)) {
  console.error(`build: no component at ${wasm}; run: cargo build -p fencing-rules --target wasm32-wasip2 --release`);
  process.exit(2);
}
const out = join(here, 'dist');
// A stale transpile of an older component must never ship.
rmSync(out, { recursive: true, force: true });
const jco = join(here, 'node_modules', '.bin', 'jco');
const run = spawnSync(jco, ['transpile', wasm, '-o', out, '--name', 'fencing_rules', '--no-typescript', '--quiet'], {
  stdio: 'inherit',
});
if (run.error) {
  console.error(`build: cannot run ${jco}: ${run.error.message} (run npm install in packages/node)`);
  process.exit(2);
}
process.exit(run.status ?? 1);
