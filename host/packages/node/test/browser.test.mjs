// The package in a browser page: headless Chromium loads test/browser.html
// from a local HTTP server over the package and the page reports PASS.
// Skipped only when FENCING_SKIP_BROWSER=1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pageResult } from './chromium.mjs';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');

test('works in headless Chromium', { skip: process.env.FENCING_SKIP_BROWSER === '1' }, async () => {
  assert.match(await pageResult(pkg, 'test/browser.html'), /^PASS \d+$/);
});
