// Loads a page in headless Chromium (Debian's `chromium`, or $CHROMIUM) from a
// local HTTP server over `dir` and returns the text the page reports: it
// writes it into <pre id="out"> and POSTs it to /__result. Used by the
// browser tests of the checkout and of the installed tarball.
//
// The test waits for the page's report, not for a span of virtual time: the
// page compiles the core module off the main thread, which virtual time does
// not wait for, so on a busy machine a time budget could end before the page.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

/** Serves `dir`, opens `page` (a path under it) and returns what the page reports. */
export async function pageResult(dir, page, { timeoutMs = 120_000 } = {}) {
  let report;
  const reported = new Promise((ok) => (report = ok));
  const server = createServer(async (req, res) => {
    const pathname = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (req.method === 'POST' && pathname === '/__result') {
      let body = '';
      req.setEncoding('utf8');
      for await (const chunk of req) body += chunk;
      res.writeHead(204).end();
      return report(body);
    }
    const path = normalize(join(dir, pathname));
    if (!path.startsWith(dir)) return res.writeHead(403).end();
    try {
      const body = await readFile(path);
      res.writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const url = `http://127.0.0.1:${server.address().port}/${page}`;
  const chromium = process.env.CHROMIUM ?? 'chromium';
  // A profile of its own: two tests' browsers must not find each other's.
  const profile = mkdtempSync(join(tmpdir(), 'fencing-chromium-'));
  const args = ['--headless', '--no-sandbox', '--disable-gpu', `--user-data-dir=${profile}`, url];
  // A process group of its own, so that the browser's helpers end with it.
  const child = spawn(chromium, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise((ok) => child.on('close', ok));
  const failed = new Promise((_, fail) => {
    child.on('error', (e) => fail(new Error(`cannot run ${chromium}: ${e.message} (scripts/setup --all installs chromium)`)));
    closed.then((code) => fail(new Error(`${chromium} exited ${code} before the page reported: ${stderr.slice(-2000)}`)));
  });
  let timer;
  const late = new Promise((_, fail) => {
    timer = setTimeout(() => fail(new Error(`the page reported nothing within ${timeoutMs / 1000} s`)), timeoutMs);
  });
  try {
    return await Promise.race([reported, failed, late]);
  } finally {
    clearTimeout(timer);
    failed.catch(() => {});
    if (child.exitCode === null && child.signalCode === null) {
      // Asked to end first, so that it takes its helper processes along.
      const signal = (name) => {
        try {
          process.kill(-child.pid, name);
        } catch {
          // Already gone.
        }
      };
      signal('SIGTERM');
      const killer = setTimeout(() => signal('SIGKILL'), 5_000);
      await closed;
      clearTimeout(killer);
    }
    server.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
