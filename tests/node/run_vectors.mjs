// Runs the shared fencing test vectors (tests/vectors/*.json) against a
// JavaScript host of the fencing:guard component and prints `N passed, M
// failed`:
// - by default, the @fencing/guard package (host/packages/node, built with `npm run
//   build`): what users call, single writes decided by `admit-code`. The
//   package takes the lock names the hosts' name rule accepts (its
//   `checkName`): a case whose lock names that rule refuses (the empty name,
//   edge whitespace, more than 256 characters, a NUL byte) must be refused
//   with the rule's code, as every host refuses it, instead of decided;
// - with --core FILE, core_abi.mjs: the package's core-ABI engine on the core
//   module of component FILE, single writes decided by the rich `admit`
//   export read from guest memory (docs/core-abi.md).
//
// Every u64 is a BigInt: the vector files are parsed losslessly (integer
// literals are turned into BigInt before any float rounding can happen). Each
// host is reached through one adapter (`packageGuard`, `coreGuard`) that
// speaks the vectors' vocabulary (tests/vectors/README.md).
//
// Usage: node run_vectors.mjs [--vectors DIR] [--core FILE]
// Exit codes: 0 all passed, 1 some case failed, 2 unreadable component or vectors.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { CoreGuard } from './core_abi.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const U64_MAX = (1n << 64n) - 1n;
const MARK = '\u0000u64\u0000';

class VectorError extends Error {}

/** JSON.parse with every non-negative integer literal (outside strings) as a BigInt. */
function parseLossless(text) {
  const marked = text.replace(/"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g, (tok) =>
    /^\d+$/.test(tok) ? JSON.stringify(MARK + tok) : tok,
  );
  return JSON.parse(marked, (_key, value) =>
    typeof value === 'string' && value.startsWith(MARK) ? BigInt(value.slice(MARK.length)) : value,
  );
}

/** Rejects any number that is not a u64 BigInt. */
function checkU64(value, where) {
  if (typeof value === 'number') throw new VectorError(`${where}: ${value} is not a u64`);
  if (typeof value === 'bigint' && value > U64_MAX) throw new VectorError(`${where}: ${value} is not a u64`);
  if (Array.isArray(value)) value.forEach((v, i) => checkU64(v, `${where}[${i}]`));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) checkU64(v, `${where}.${k}`);
}

/** Verdict bytes of batch/stream outcomes: the WIT `enum verdict-code` cases in order (byte N is case N). */
const VERDICT_CODES = [
  'admitted',
  'admitted_new_term',
  'invalid_token',
  'wrong_lock',
  'stale_token',
  'token_reused',
  'sequence_regressed',
];

const code = (byte) => {
  const c = VERDICT_CODES[byte];
  if (c === undefined) throw new Error(`component returned unknown verdict code ${byte}`);
  return c;
};

/** Verdict bytes to verdicts: each rejected write was compared with the fence left by the last admitted write before it (or `current`). */
function expandBatch(current, writes, codes) {
  if (codes.length !== writes.length) {
    throw new Error(`component returned ${codes.length} verdicts for ${writes.length} writes`);
  }
  let state = current == null ? null : { highWater: current.high_water, sequence: current.sequence ?? null };
  return writes.map((w, i) => {
    const c = code(codes[i]);
    const sequence = w.sequence ?? null;
    if (c === 'admitted' || c === 'admitted_new_term') {
      state = { highWater: w.token, sequence };
      return { verdict: 'admitted', high_water: w.token, sequence, new_term: c === 'admitted_new_term' };
    }
    if (c === 'invalid_token' || c === 'wrong_lock') return { verdict: c };
    if (state === null || (c === 'sequence_regressed' && state.sequence === null)) {
      throw new Error(`component returned ${c} for a write with no fence to compare with`);
    }
    if (c === 'sequence_regressed') return { verdict: c, token: w.token, presented: sequence, last: state.sequence };
    return { verdict: c, presented: w.token, high_water: state.highWater };
  });
}

/** Stream verdict bytes to the vectors' names. */
function streamVerdicts(codes) {
  return Array.from(codes, (byte) => {
    const c = code(byte);
    if (c === 'wrong_lock' || c === 'sequence_regressed') throw new Error(`component returned ${c} in a stream`);
    return c === 'admitted_new_term' ? 'admitted' : c;
  });
}

/** The adapter for the core-ABI host (core_abi.mjs): verdict bytes expanded into the vectors' vocabulary. */
function coreGuard(core) {
  return {
    admit: (current, presented, policy) => core.admit(current, presented, policy),
    batch(current, lock, writes, policy) {
      const out = core.batch(current, lock, writes, policy);
      return { verdicts: expandBatch(current, writes, out.codes), fence: out.fence };
    },
    stream(highWater, tokens, policy) {
      const out = core.stream(highWater, tokens, policy);
      return { verdicts: streamVerdicts(out.codes), high_water: out.highWater };
    },
  };
}

/** The case's lock names in the order a guard interns them: the fence's, then the presented one. */
function lockNames(c) {
  const names = c.fence ? [c.fence.lock] : [];
  if (c.kind === 'admit') names.push(c.sequencer.lock);
  if (c.kind === 'batch') names.push(c.lock);
  return names;
}

/** `{refused: code}` for an argument the package refused by the hosts' rules (the error's `code`). */
function refusedBy(call) {
  try {
    return call();
  } catch (e) {
    if (typeof e.code === 'string') return { refused: e.code };
    throw e;
  }
}

/** The adapter for the @fencing/guard package (host/packages/node): its decisions in the vectors' vocabulary. */
function packageGuard(guard, checkName) {
  const verdict = (d) => {
    if (d.admitted) return { verdict: 'admitted', high_water: d.highWater, sequence: d.sequence, new_term: d.newTerm };
    const out = { verdict: d.reason };
    if ('token' in d) out.token = d.token;
    if ('presented' in d) out.presented = d.presented;
    if ('highWater' in d) out.high_water = d.highWater;
    if ('last' in d) out.last = d.last;
    return out;
  };
  const fence = (f) => f && { lock: f.lock, highWater: f.high_water, sequence: f.sequence };
  // The vectors name policies as the HTTP API does; the package takes the contract's names.
  const named = (policy) => policy.replace('_', '-');
  return {
    admit: (current, p, policy) => refusedBy(() => verdict(guard.admit(fence(current), p, named(policy)))),
    batch(current, lock, writes, policy) {
      return refusedBy(() => {
        const out = guard.admitBatch(fence(current), lock, writes, named(policy));
        return {
          verdicts: out.verdicts.map(verdict),
          fence: out.fence && { high_water: out.fence.highWater, sequence: out.fence.sequence },
        };
      });
    },
    stream(highWater, tokens, policy) {
      const out = guard.admitStream(highWater, tokens, named(policy));
      return { verdicts: out.verdicts, high_water: out.highWater };
    },
    /** The package's refusal of the case's first lock name its rule refuses, or null. */
    refusal(c) {
      for (const name of lockNames(c)) {
        const r = refusedBy(() => checkName(name));
        if (r !== name) return r;
      }
      return null;
    },
  };
}

function normaliseVerdict(v) {
  const out = { ...v };
  if (out.verdict === 'admitted') out.sequence ??= null;
  if (out.verdict === 'sequence_regressed') out.presented ??= null;
  return out;
}

function expectedOf(c) {
  const e = c.expect;
  switch (c.kind) {
    case 'admit':
      return normaliseVerdict(e);
    case 'batch':
      return {
        verdicts: e.verdicts.map(normaliseVerdict),
        fence: e.fence == null ? null : { high_water: e.fence.high_water, sequence: e.fence.sequence ?? null },
      };
    default:
      return { verdicts: [...e.verdicts], high_water: e.high_water };
  }
}

function runCase(guard, c) {
  switch (c.kind) {
    case 'admit':
      return guard.admit(c.fence, c.sequencer, c.policy);
    case 'batch':
      return guard.batch(c.fence, c.lock, c.writes, c.policy);
    case 'stream':
      return guard.stream(c.high_water, c.tokens, c.policy);
    default:
      throw new VectorError(`unknown kind ${c.kind}`);
  }
}

function loadVectors(dir) {
  let names;
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json')).sort();
  } catch (e) {
    throw new VectorError(`${dir}: ${e.message}`);
  }
  if (names.length === 0) throw new VectorError(`${dir}: no *.json vector files`);
  const seen = new Set();
  return names.map((name) => {
    let doc;
    try {
      doc = parseLossless(readFileSync(join(dir, name), 'utf8'));
    } catch (e) {
      throw new VectorError(`${name}: ${e.message}`);
    }
    if (!doc || !Array.isArray(doc.cases)) throw new VectorError(`${name}: no "cases" list`);
    doc.cases.forEach((c, i) => {
      if (!c || typeof c.name !== 'string' || c.name === '') throw new VectorError(`${name}: case #${i} has no name`);
      if (seen.has(c.name)) throw new VectorError(`${name}: duplicate case name ${c.name}`);
      seen.add(c.name);
      if (!['admit', 'batch', 'stream'].includes(c.kind) || !('expect' in c)) {
        throw new VectorError(`${name}: case #${i} (${c.name}): needs kind admit|batch|stream and expect`);
      }
      checkU64(c, `${name}: ${c.name}`);
    });
    return { name, cases: doc.cases };
  });
}

const show = (v) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));

async function main() {
  const args = process.argv.slice(2);
  const at = args.indexOf('--vectors');
  const dir = at >= 0 ? resolve(args[at + 1] ?? '') : join(root, 'tests', 'vectors');

  let files;
  try {
    files = loadVectors(dir);
  } catch (e) {
    console.error(`error: invalid vectors: ${e.message}`);
    return 2;
  }
  const core = args.indexOf('--core');
  let guard;
  if (core >= 0) {
    try {
      guard = coreGuard(new CoreGuard(readFileSync(resolve(args[core + 1] ?? ''))));
    } catch (e) {
      console.error(`error: cannot run the component's core module: ${e.message}`);
      return 2;
    }
  } else {
    try {
      const mod = await import(pathToFileURL(join(root, 'host', 'packages', 'node', 'index.js')).href);
      guard = packageGuard(new mod.Guard(), mod.checkName);
    } catch (e) {
      console.error(`error: cannot load @fencing/guard (npm install && npm run build in host/packages/node): ${e.message}`);
      return 2;
    }
  }

  let passed = 0;
  let failed = 0;
  let refused = 0;
  for (const file of files) {
    let filePassed = 0;
    for (const c of file.cases) {
      const refusal = guard.refusal?.(c) ?? null;
      if (refusal !== null) refused += 1;
      const expected = refusal ?? expectedOf(c);
      let got;
      try {
        got = runCase(guard, c);
      } catch (e) {
        got = `<error: ${e.message}>`;
      }
      if (isDeepStrictEqual(got, expected)) {
        filePassed += 1;
      } else {
        console.log(`  FAIL ${c.name} (${c.kind}): expected ${show(expected)}\n    got ${show(got)}`);
      }
    }
    passed += filePassed;
    failed += file.cases.length - filePassed;
    console.log(`${file.name}: ${filePassed}/${file.cases.length}`);
  }
  if (refused > 0) console.log(`(${refused} of them by refusing a lock name the hosts' name rule refuses, with its code)`);
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 && passed > 0 ? 0 : 1;
}

process.exitCode = await main();
