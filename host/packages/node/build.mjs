// Builds the package's dist/: the core module of the fencing:guard component
// (dist/fencing_guard.wasm), which index.js runs on the platform's own
// WebAssembly. The component's bytes are checked to hold exactly one module
// implementing the contract (core.js, `coreModuleBytes`).
//
// Usage: node build.mjs [FILE]
//   FILE defaults to $FENCING_GUARD_WASM, else the repository's release build,
//   target/wasm32-wasip2/release/fencing_rules.wasm (cargo build -p
//   fencing-rules --target wasm32-wasip2 --release).
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coreModuleBytes } from './core.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const wasm = resolve(
  process.argv[2] ?? process.env.FENCING_GUARD_WASM ?? join(root, 'target', 'wasm32-wasip2', 'release', 'fencing_rules.wasm'),
);
if (!existsSync(wasm)) {
  console.error(`build: no component at ${wasm}; run: cargo build -p fencing-rules --target wasm32-wasip2 --release`);
  process.exit(2);
}
const out = join(here, 'dist');
// A stale module of an older component must never ship.
rmSync(out, { recursive: true, force: true });
mkdirSync(out);
let module;
try {
  module = coreModuleBytes(readFileSync(wasm));
} catch (e) {
  console.error(`build: ${wasm}: ${e.message}`);
  process.exit(2);
}
writeFileSync(join(out, 'fencing_guard.wasm'), module);
