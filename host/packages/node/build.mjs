// Builds the package's dist/: the core module of the fencing:guard component
// (dist/fencing_guard.wasm), which index.js runs on the platform's own
// WebAssembly. The component's bytes are checked to hold exactly one module
// implementing the contract (core.js, `coreModuleBytes`).
//
// Usage: node build.mjs [FILE]
//   FILE defaults to $FENCING_GUARD_WASM, else the repository's committed
//   component, guest/fencing_guard.wasm (scripts/build-component writes it).
// `npm pack` and `npm publish` run it first (the prepack script): without a
// component it exits 2 and nothing is packed, so no tarball ships without one.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coreModuleBytes } from './core.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const wasm = resolve(
  process.argv[2] || process.env.FENCING_GUARD_WASM || join(root, 'guest', 'fencing_guard.wasm'),
);
const out = join(here, 'dist');
// A stale module of an older component must never ship, nor outlive a failed build.
rmSync(out, { recursive: true, force: true });
if (!existsSync(wasm)) {
  console.error(
    `build: no component at ${wasm}: build the package from a checkout of the fencing repository ` +
      '(guest/fencing_guard.wasm is committed there), or name a fencing_guard.wasm (node build.mjs FILE, or FENCING_GUARD_WASM)',
  );
  process.exit(2);
}
mkdirSync(out);
let module;
try {
  module = coreModuleBytes(readFileSync(wasm));
} catch (e) {
  console.error(`build: ${wasm}: ${e.message}`);
  process.exit(2);
}
writeFileSync(join(out, 'fencing_guard.wasm'), module);
