// `squall run --junit` read by a real JUnit consumer: junit2json (npm), the parser CI tools
// built on xml2js use, installed into build/npm on first use like the browser tests'
// playwright-core. A plan against `squall target` (bounded: 20 iterations) with one passing and
// one failing threshold and one passing and one failing check; what the parser hands a CI
// dashboard must name each test case, its verdict and the figure against the bound, and a plan
// name with markup in it must come back as written.
//
// Environment (ctest sets it): SQUALL (the binary), SQ_NPM_DIR (build/npm).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const SQUALL = process.env.SQUALL || path.join(root, 'build', 'squall');
const NPM_DIR = process.env.SQ_NPM_DIR || path.join(root, 'build', 'npm');
const PKG = 'junit2json';

let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok    ${name}`);
  } else {
    failed++;
    console.log(`FAIL  ${name}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  }
}

async function loadParser() {
  const entry = path.join(NPM_DIR, 'node_modules', PKG, 'package.json');
  if (!fs.existsSync(entry)) {
    console.log(`installing ${PKG} into ${NPM_DIR}`);
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', NPM_DIR,
      `${PKG}@4`], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`npm install ${PKG}@4 failed`);
  }
  const main = JSON.parse(fs.readFileSync(entry, 'utf8')).exports['.'].default;
  return (await import(pathToFileURL(path.join(NPM_DIR, 'node_modules', PKG, main)))).parse;
}

// `squall target --port 0`: resolves with the process and its port once it listens.
function startTarget() {
  return new Promise((resolve, reject) => {
    const p = spawn(SQUALL, ['target', '--port', '0', '-t', '1'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let buf = '';
    const timer = setTimeout(() => reject(new Error('target did not listen in 10 s')), 10000);
    p.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc: p, port: Number(m[1]) });
      }
    });
    p.on('exit', (code) => reject(new Error(`target exited ${code}`)));
  });
}

const parse = await loadParser();
const { proc, port } = await startTarget();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sq-junit-'));
try {
  const plan = path.join(dir, 'plan.yaml');
  fs.writeFileSync(plan, `name: "nightly <&\\"]]> gate"
target: http://127.0.0.1:${port}
scenarios:
  shop:
    executor: shared-iterations
    vus: 2
    iterations: 20
    flow:
      - name: home
        request: { url: /fast }
        check: { status: 200 }
      - name: missing
        request: { url: /status/404 }
        check: { status: 200 }
thresholds:
  http_req_duration: ["p(95) < 600000"]
  checks: ["rate > 0.99"]
`);
  const xml = path.join(dir, 'junit.xml');
  const r = spawnSync(SQUALL, ['run', plan, '-q', '--junit', xml], { encoding: 'utf8', timeout: 60000 });
  check('exit 99 (a threshold failed)', r.status === 99, r.stderr);
  const doc = await parse(fs.readFileSync(xml, 'utf8'));
  check('testsuites name as written', doc.name === 'squall: nightly <&"]]> gate', doc.name);
  check('testsuites counts', doc.tests === 4 && doc.failures === 2 && doc.errors === 0,
    [doc.tests, doc.failures, doc.errors]);
  const suites = Object.fromEntries((doc.testsuite || []).map((s) => [s.name, s]));
  check('two suites', Object.keys(suites).join() === 'thresholds,checks', Object.keys(suites));
  const th = suites.thresholds?.testcase || [];
  check('a case per threshold', th.map((c) => c.name).join('|') ===
    'http_req_duration: p(95) < 600000|checks: rate > 0.99', th.map((c) => c.name));
  check('the passing threshold has no failure', th[0] && !th[0].failure, th[0]);
  check('its figure', /^p\(95\)=[\d.e+-]+ms, bound < 600000$/.test(th[0]?.['system-out']?.[0]),
    th[0]);
  const f = th[1]?.failure?.[0];
  check('the failing threshold: figure against bound', f && f.message === 'rate=0.5, bound > 0.99'
    && f.type === 'threshold', f);
  const ck = suites.checks?.testcase || [];
  check('a case per check', ck.map((c) => `${c.classname}/${c.name}`).join('|') ===
    'squall.checks.shop/home: status 200|squall.checks.shop/missing: status 200', ck);
  check('the passing check', ck[0] && !ck[0].failure && ck[0]['system-out']?.[0] === 'passed 20, failed 0', ck[0]);
  check('the failing check', ck[1]?.failure?.[0]?.message === '20 of 20 failed', ck[1]);
  check('suite counts', suites.checks?.tests === 2 && suites.checks?.failures === 1 &&
    suites.thresholds?.tests === 2 && suites.thresholds?.failures === 1, [suites.checks, suites.thresholds].map((s) => s && [s.tests, s.failures]));
} finally {
  const gone = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGTERM');
  await gone;
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
