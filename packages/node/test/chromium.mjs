// Loads a page in headless Chromium (Debian's `chromium`, or $CHROMIUM) from a
// local HTTP server over `dir` and returns what the page wrote into
// <pre id="out">. Used by the browser tests of the checkout and of the
// installed tarball.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm' };

/** Serves `dir`, opens `page` (a path under it) and returns the page's #out text. */
export async function pageResult(dir, page) {
  const server = createServer(async (req, res) => {
    const path = normalize(join(dir, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
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
    return /<pre id="out">([^<]*)<\/pre>/.exec(dom)?.[1] ?? `no result in ${dom.slice(0, 500)}`;
  } finally {
    server.close();
  }
}
