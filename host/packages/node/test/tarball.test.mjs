// The artifact users install: `npm pack` makes a tarball, which is installed
// with `npm install FILE.tgz` into an empty folder outside the checkout. There
// the README's example runs under Node and gives the README's answer, and the
// same installed files load in a page in headless Chromium (the page imports
// node_modules/@fencing/guard/index.js, so nothing of the checkout is served).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { pageResult } from './chromium.mjs';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const npm = (args, cwd) => execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, encoding: 'utf8' });

test('the packed tarball installs into an empty folder and answers there', async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'fencing-guard-tgz-'));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  npm(['pack', '--pack-destination', tmp], pkg);
  const [tgz] = readdirSync(tmp).filter((f) => f.endsWith('.tgz'));
  assert.ok(tgz, 'npm pack wrote no tarball');
  const app = join(tmp, 'app');
  execFileSync('mkdir', [app]);
  npm(['init', '-y'], app);
  npm(['install', join(tmp, tgz)], app);
  const installed = readdirSync(join(app, 'node_modules', '@fencing', 'guard')).sort();
  assert.deepEqual(installed, ['README.md', 'accept.js', 'core.js', 'dist', 'index.d.ts', 'index.js', 'package.json']);

  writeFileSync(
    join(app, 'example.mjs'),
    `import { Guard } from '@fencing/guard';
const guard = new Guard();
const fence = { lock: 'orders', highWater: 34n };
console.log(guard.admit(fence, { lock: 'orders', token: 33n }));
`,
  );
  const out = execFileSync(process.execPath, ['example.mjs'], { cwd: app, encoding: 'utf8' });
  assert.match(out, /admitted: false,\s+reason: 'stale_token',\s+presented: 33n,\s+highWater: 34n/);

  if (process.env.FENCING_SKIP_BROWSER === '1') return t.skip('FENCING_SKIP_BROWSER=1');
  const html = readFileSync(join(pkg, 'test', 'browser.html'), 'utf8');
  assert.ok(html.includes("'../index.js'"), 'browser.html imports ../index.js');
  writeFileSync(join(app, 'page.html'), html.replace("'../index.js'", "'./node_modules/@fencing/guard/index.js'"));
  assert.match(await pageResult(app, 'page.html'), /^PASS \d+$/);
});
