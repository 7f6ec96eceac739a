// Every shared vector and 10,000 random cases (written by `fencing check
// --random`, expecting the native Rust rules' verdicts) through this package,
// by the repository's vector runner (its default host is this package).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const runner = join(root, 'tests', 'node', 'run_vectors.mjs');

function run(...args) {
  const out = spawnSync(process.execPath, [runner, ...args], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stdout + out.stderr);
  return out.stdout.trim().split('\n').at(-1);
}

test('every shared vector', () => {
  assert.match(run(), /^\d+ passed, 0 failed$/);
});

test('10,000 random cases agree with the native rules', () => {
  const fencing = process.env.FENCING_BIN ?? join(root, 'target', 'debug', 'fencing');
  assert.ok(existsSync(fencing), `no fencing binary at ${fencing}: cargo build -p fencing, or set FENCING_BIN`);
  const dir = mkdtempSync(join(tmpdir(), 'fencing-random-'));
  try {
    execFileSync(fencing, ['check', '--random', '10000', '--seed', '31', '--out', join(dir, 'random.json')]);
    assert.equal(run('--vectors', dir), '10000 passed, 0 failed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
