// The package in a browser page: headless Chromium (Debian's `chromium`, or
// $CHROMIUM) loads test/browser.html from a local HTTP server and the page
// reports PASS. Skipped only when FENCING_SKIP_BROWSER=1.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { dirname, extname, join, normalize, resolve } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

test('works in headless Chromium', { skip: process.env.FENCING_SKIP_BROWSER === '1' }, async () => {
  const server = createServer(async (req, res) => {
    const path = normalize(join(pkg, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
    if (!path.startsWith(pkg)) return res.writeHead(403).end();
    try {
      const body = await readFile(path);
      res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}/test/browser.html`;
  const chromium = process.env.CHROMIUM ?? 'chromium';
  try {
    const dom = await new Promise((ok, fail) => {
      const child = spawn(chromium, ['--headless', '--no-sandbox', '--disable-gpu', '--virtual-time-budget=20000', '--dump-dom', url]);
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', (e) => fail(new Error(`cannot run ${chromium}: ${e.message} (scripts/setup --all installs chromium)`)));
      child.on('close', (code) => (code === 0 ? ok(stdout) : fail(new Error(`${chromium} exited ${code}: ${stderr.slice(-2000)}`))));
    });
    const result = /<pre id="out">([^<]*)<\/pre>/.exec(dom)?.[1];
    assert.match(result ?? `no result in ${dom.slice(0, 500)}`, /^PASS \d+$/);
  } finally {
    server.close();
  }
});
