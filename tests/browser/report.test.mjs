// tests/browser/report.test.mjs - the HTML report in a real browser.
//
// Runs a short load test against `squall target`, turns its --json result into an HTML report
// with `squall report FILE --html OUT`, opens the report from file:// in headless Chromium (the
// Debian package, scripts/deps.sh browser) driven by playwright-core (npm, installed into the
// build tree's npm/ folder on first use), and checks: no console error and no page error, no
// request leaves the file, every chart's canvas has its data drawn, and strings from the
// document cannot inject markup. It does the same for tests/browser/fixture.json (an open-loop
// run: the uncorrected percentile curve), for that fixture without its series, and for a
// document with hostile strings.
//
// Environment (ctest sets it): SQUALL (the binary), SQ_NPM_DIR (build/npm), SQ_ARTIFACTS
// (build/artifacts: the reports and screenshots land there), CHROMIUM (default
// /usr/bin/chromium). Exit 0 when every check passed, 1 when one failed, 77 (skipped) without
// Chromium.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const SQUALL = process.env.SQUALL || path.join(root, 'build', 'squall');
const NPM_DIR = process.env.SQ_NPM_DIR || path.join(root, 'build', 'npm');
const ARTIFACTS = process.env.SQ_ARTIFACTS || path.join(root, 'build', 'artifacts');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok    ${name}`);
  } else {
    failed++;
    console.log(`FAIL  ${name}${detail === undefined ? '' : ': ' + detail}`);
  }
}

function loadPlaywright() {
  const req = createRequire(path.join(NPM_DIR, 'package.json'));
  try {
    return req('playwright-core');
  } catch {
    console.log(`installing playwright-core into ${NPM_DIR}`);
    // 1.61: the last that runs on Debian 12's Node.js 18 (1.62 and later need Node 20 and exit)
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', NPM_DIR,
      'playwright-core@1.61'], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('npm install playwright-core@1.61 failed');
    return req('playwright-core');
  }
}

// Starts `squall target --port 0`; resolves to { proc, port } once it prints its listening line.
function startTarget(extra = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(SQUALL, ['target', '--port', '0', '--threads', '1', ...extra],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error('squall target printed no listening line in 10 s'));
    }, 10000);
    proc.on('error', (e) => { clearTimeout(timer); reject(e); });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`squall target exited (${code}) before listening: ${JSON.stringify(buf)}`));
    });
    proc.stdout.on('data', (chunk) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const m = /^squall target listening on http:\/\/127\.0\.0\.1:(\d+)$/.exec(buf.slice(0, nl));
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      proc.stdout.removeAllListeners('data');
      proc.stdout.resume(); // keep draining
      if (!m) {
        proc.kill('SIGKILL');
        reject(new Error(`unexpected first line ${JSON.stringify(buf.slice(0, nl))}`));
      } else {
        resolve({ proc, port: Number(m[1]) });
      }
    });
  });
}

function stopTarget(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
    proc.once('exit', () => { clearTimeout(t); resolve(); });
    process.kill(proc.pid, 'SIGTERM');
  });
}

function squall(args) {
  const r = spawnSync(SQUALL, args, { encoding: 'utf8', timeout: 60000 });
  return { code: r.status, out: r.stdout || '', err: r.stderr || '' };
}

// Pixel statistics of every chart's canvas: painted (alpha > 0) and chromatic (a saturated
// colour: the series; axes, grid and labels are grey) samples.
async function canvasStats(page) {
  return page.evaluate(() => (window.squallCharts || []).map((c) => {
    const cv = c.plot.ctx.canvas;
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    let painted = 0, chromatic = 0;
    for (let i = 0; i < d.length; i += 4 * 3) {
      if (d[i + 3] === 0) continue;
      painted++;
      const mx = Math.max(d[i], d[i + 1], d[i + 2]), mn = Math.min(d[i], d[i + 1], d[i + 2]);
      if (mx - mn > 60 && d[i + 3] > 128) chromatic++;
    }
    return { id: c.id, w: cv.width, h: cv.height, series: c.plot.series.length, painted,
      chromatic };
  }));
}

// Opens file in a fresh page; returns { page, problems, requests } after the charts are drawn.
async function open(ctx, file) {
  const page = await ctx.newPage();
  const problems = [], requests = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) requests.push(r.url()); });
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.squallReady === true, null, { timeout: 10000 })
    .catch(() => problems.push('report.js never finished (window.squallReady unset)'));
  await page.waitForTimeout(200); // let uPlot's deferred first draw land
  return { page, problems, requests };
}

async function checkReport(ctx, name, html, want) {
  const { page, problems, requests } = await open(ctx, html);
  check(`${name}: no console or page error`, problems.length === 0, problems.join(' | '));
  check(`${name}: nothing fetched beyond the file`, requests.length === 0, requests.join(' '));
  const stats = await canvasStats(page);
  const ids = stats.map((s) => s.id).sort().join(',');
  check(`${name}: charts ${want.charts.join(',')}`, ids === [...want.charts].sort().join(','), ids);
  const nCanvas = await page.evaluate(() => document.querySelectorAll('.uplot canvas').length);
  check(`${name}: one canvas per chart`, nCanvas === stats.length, `${nCanvas} canvases`);
  for (const s of stats) {
    check(`${name}: ${s.id} has its data drawn`, s.w > 0 && s.h > 0 && s.chromatic >= 20,
      JSON.stringify(s));
  }
  if (want.hdrSeries) {
    const hdr = stats.find((s) => s.id === 'chart-hdr');
    check(`${name}: percentile plot has ${want.hdrSeries - 1} curve(s)`,
      hdr && hdr.series === want.hdrSeries, hdr && hdr.series);
  }
  const text = await page.evaluate(() => document.body.innerText);
  for (const t of want.text || []) check(`${name}: says "${t}"`, text.includes(t));
  for (const t of want.notText || []) check(`${name}: does not say "${t}"`, !text.includes(t));
  const h2 = await page.evaluate(() => [...document.querySelectorAll('h2')].map((h) => h.textContent));
  for (const t of want.sections || []) check(`${name}: has a "${t}" section`, h2.includes(t), h2);
  for (const t of want.noSections || []) {
    check(`${name}: has no "${t}" section`, !h2.includes(t), h2);
  }
  if (want.screenshot) {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.waitForTimeout(300); // the resize handler redraws the charts
    await page.screenshot({ path: want.screenshot, fullPage: true });
    check(`${name}: screenshot ${path.basename(want.screenshot)}`,
      fs.statSync(want.screenshot).size > 10000);
  }
  return page;
}

async function main() {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`skipped: no Chromium at ${CHROMIUM} (scripts/deps.sh browser installs it)`);
    process.exit(77);
  }
  const { chromium } = loadPlaywright();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'squall-report-'));
  const profile = path.join(tmp, 'profile');
  let target = null, ctx = null;
  try {
    // 1. A live run against the built-in target.
    target = await startTarget();
    const result = path.join(ARTIFACTS, 'result.json');
    const run = squall([`http://127.0.0.1:${target.port}/fast`, '-d', '3s', '-c', '8', '-t', '1',
      '--json', result, '-q']);
    check('live run exits 0', run.code === 0, run.err);
    await stopTarget(target.proc);
    target = null;
    const live = JSON.parse(fs.readFileSync(result, 'utf8'));
    const liveHasSeries = Array.isArray(live.series) && live.series.length > 0;
    const liveHtml = path.join(ARTIFACTS, 'report.html');
    const rep = squall(['report', result, '--html', liveHtml]);
    check('squall report --html exits 0', rep.code === 0, rep.err);
    const sum = squall(['report', result]);
    check('squall report prints the summary', sum.code === 0 && /^Requests +[\d,]+ sent/m.test(sum.out),
      sum.err || sum.out.slice(0, 200));

    // 1b. Against a target that holds every response for 300 ms once a second (--stall), named:
    // the 100 ms chart shows the stall; and a plan whose threshold is crossed: the FAIL banner.
    target = await startTarget(['--stall', '300ms/1s']);
    const stallJson = path.join(ARTIFACTS, 'result-stall.json');
    const stallHtml = path.join(ARTIFACTS, 'report-stall.html');
    const sr = squall([`http://127.0.0.1:${target.port}/fast`, '-d', '3s', '-c', '4', '-t', '1',
      '--name', 'stall-check', '--json', stallJson, '--html', stallHtml, '-q']);
    check('stall run exits 0', sr.code === 0, sr.err);
    const planFile = path.join(tmp, 'banner.yaml');
    fs.writeFileSync(planFile, `target: http://127.0.0.1:${target.port}\nname: banner-check\n` +
      'scenarios:\n  s:\n    executor: constant-arrival-rate\n    rate: 40\n    duration: 3s\n' +
      '    preAllocatedVUs: 2\n' +
      '    flow:\n      - name: home\n        request: { url: /fast }\n' +
      '        check: { status: 201 }\n' +
      '      - name: missing\n        request: { url: /status/404 }\n' +
      '        check: { status: 404 }\nthresholds:\n  checks: ["rate > 0.99"]\n');
    const planHtml = path.join(ARTIFACTS, 'report-plan.html');
    const pr = squall(['run', planFile, '--html', planHtml, '-q']);
    check('plan run exits 99 (threshold crossed)', pr.code === 99, pr.err);
    await stopTarget(target.proc);
    target = null;

    // 2. The fixture: an open-loop run with its per-second series.
    const fixture = path.join(here, 'fixture.json');
    const fixHtml = path.join(ARTIFACTS, 'report-fixture.html');
    const fr = squall(['report', fixture, '--html', fixHtml]);
    check('fixture: squall report --html exits 0', fr.code === 0, fr.err);

    // 3. The fixture without its series.
    const doc = JSON.parse(fs.readFileSync(fixture, 'utf8'));
    const noSeries = { ...doc };
    delete noSeries.series;
    const nsJson = path.join(tmp, 'no-series.json'), nsHtml = path.join(ARTIFACTS, 'report-no-series.html');
    fs.writeFileSync(nsJson, JSON.stringify(noSeries));
    check('no series: squall report --html exits 0', squall(['report', nsJson, '--html', nsHtml]).code === 0);

    // 4. Hostile strings wherever the document carries text.
    const evil = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">' +
      '<!--\'"&amp;\u2028';
    const hostile = JSON.parse(JSON.stringify(doc));
    hostile.config.url = 'http://127.0.0.1:1/' + evil;
    hostile.config.method = evil;
    hostile.abort_reason = evil;
    hostile.aborted = true;
    hostile.errors[evil] = 3;
    hostile.steps = [{ scenario: evil, step: evil, method: evil, requests: 12 }, { step: 'b' }];
    hostile.checks = [{ scenario: evil, step: evil, check: evil, passed: 1, failed: 0 }];
    hostile.thresholds = [{ metric: 'latency p99', condition: '< 10ms', ok: true, note: evil }];
    hostile.controls = [{ t_s: 1, kind: evil, value: 1, scenario: evil }];
    const hJson = path.join(tmp, 'hostile.json'), hHtml = path.join(ARTIFACTS, 'report-hostile.html');
    fs.writeFileSync(hJson, JSON.stringify(hostile));
    check('hostile: squall report --html exits 0', squall(['report', hJson, '--html', hHtml]).code === 0);

    // 5. The fixture changed while it ran (--control, POST /runs/{id}/control): its controls.
    const controlled = JSON.parse(JSON.stringify(doc));
    controlled.controls = [{ t_s: 2.5, kind: 'rate', value: 300 }, { t_s: 4, kind: 'pause', value: 0 },
      { t_s: 5, kind: 'resume', value: 0 }];
    const cJson = path.join(tmp, 'controlled.json'), cHtml = path.join(ARTIFACTS, 'report-controlled.html');
    fs.writeFileSync(cJson, JSON.stringify(controlled));
    check('controlled: squall report --html exits 0', squall(['report', cJson, '--html', cHtml]).code === 0);

    fs.mkdirSync(profile);
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM, headless: true, args: ARGS,
      viewport: { width: 1280, height: 900 },
    });

    await checkReport(ctx, 'live', liveHtml, {
      // a live run's series carries squall's own cost per second (docs/instruments.md)
      charts: liveHasSeries
        ? ['chart-throughput', 'chart-latency', 'chart-fine', 'chart-hdr', 'chart-status',
          'chart-client']
        : ['chart-fine', 'chart-hdr', 'chart-status'],
      hdrSeries: 2,
      text: ['Request accounting', 'constant-vus',
        ...(liveHasSeries ? [] : ['no per-second series'])],
      sections: ['Summary', 'Latency distribution (percentiles)', 'Status codes and errors',
        'Configuration'],
      noSections: ['Steps', 'Checks', 'Thresholds'],
      screenshot: path.join(ARTIFACTS, 'report.png'),
    });
    const sp = await checkReport(ctx, 'stall', stallHtml, {
      charts: ['chart-throughput', 'chart-latency', 'chart-fine', 'chart-hdr', 'chart-status',
        'chart-client'],
      hdrSeries: 2,
      text: ['stall-check', 'Every 100 ms', 'Responses by exact status'],
      screenshot: path.join(ARTIFACTS, 'report-stall.png'),
    });
    const when = await sp.evaluate(() => {
      const a = document.getElementById('run-start'), b = document.getElementById('run-end');
      return [a && a.textContent, b && b.textContent];
    });
    const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$/;
    check('stall: the start and end dates are at the top', iso.test(when[0]) && iso.test(when[1]),
      JSON.stringify(when));
    // the 100 ms series as drawn: bins with a stalled response (>= 200 ms) and fast ones (< 50 ms)
    const fmax = await sp.evaluate(() => {
      const c = window.squallCharts.find((x) => x.id === 'chart-fine');
      return c ? c.plot.data[2] : [];
    });
    const slow = fmax.filter((v) => v >= 200000).length, fast = fmax.filter((v) => v != null && v < 50000).length;
    check('stall: the 100 ms chart shows the stall beside fast bins', slow >= 2 && fast >= 5,
      `slow ${slow}, fast ${fast} of ${fmax.length}`);
    const pp = await checkReport(ctx, 'plan', planHtml, {
      charts: ['chart-throughput', 'chart-latency', 'chart-fine', 'chart-steps', 'chart-hdr',
        'chart-status', 'chart-client'],
      hdrSeries: 3, /* an arrival-rate plan: the uncorrected curve too */
      text: ['banner-check', 'run ', 'FAIL · thresholds crossed: checks rate > 0.99',
        'Steps over time'],
      sections: ['Thresholds', 'Checks', 'Steps'],
      screenshot: path.join(ARTIFACTS, 'report-plan.png'),
    });
    const order = await pp.evaluate(() => [...document.querySelectorAll('h2')].map((h) => h.textContent));
    check('plan: thresholds and checks come before the summary',
      order.indexOf('Thresholds') === 0 && order.indexOf('Checks') === 1, order.join(','));
    // the steps as a table in the flow's order, each step's failures apart and its checks
    const stepRows = await pp.evaluate(() => [...document.querySelectorAll('#steps tr')].slice(1)
      .map((tr) => [...tr.cells].map((td) => td.textContent)));
    check('plan: the Steps section is a table of home then missing',
      stepRows.map((r) => r[0]).join(',') === 'home,missing', JSON.stringify(stepRows));
    const [home, missing] = stepRows.length === 2 ? stepRows : [[], []];
    const n = (t) => Number(String(t).replace(/,/g, ''));
    // step, method, requests, failed, transport, HTTP, p50, p95, p99, checks
    check('plan: a step answered 404 every time shows every request as an HTTP failure',
      n(missing[2]) > 0 && n(missing[3]) === n(missing[2]) && n(missing[4]) === 0 &&
      n(missing[5]) === n(missing[2]), JSON.stringify(missing));
    check('plan: a step answered 200 shows no failure', n(home[2]) > 0 && n(home[3]) === 0,
      JSON.stringify(home));
    check('plan: each step has its p50, p95 and p99',
      [6, 7, 8].every((i) => /\d(µs|ms|s)$/.test(home[i] || '') && /\d(µs|ms|s)$/.test(missing[i] || '')),
      JSON.stringify(stepRows));
    check('plan: each step shows its checks',
      /^✗ status 201 · 0 passed, [\d,]+ failed$/.test(home[9] || '') &&
      /^✓ status 404 · [\d,]+ passed, 0 failed$/.test(missing[9] || ''), JSON.stringify(stepRows));
    // request accounting: the three kinds of failure apart
    const acct = await pp.evaluate(() => {
      const h = [...document.querySelectorAll('h3')].find((x) => x.textContent === 'Request accounting');
      const o = {};
      if (h) for (const tr of h.nextElementSibling.rows) o[tr.cells[0].textContent] = tr.cells[1].textContent;
      return o;
    });
    check('plan: request accounting shows the 404s as HTTP failures',
      n(acct['Failed: transport (no response)']) === 0 &&
      n(acct['Failed: HTTP (status ≥ 400)']) === n(missing[2]), JSON.stringify(acct));
    const cf = String(acct['Failed: checks']).split(' of ');
    check('plan: request accounting shows the failed checks (each home request failed its check)',
      cf.length === 2 && n(cf[0]) === n(home[2]) && n(cf[1]) === n(home[2]) + n(missing[2]),
      JSON.stringify(acct));
    const banner = await pp.evaluate(() => {
      const v = document.getElementById('verdict');
      return v ? [v.className, getComputedStyle(v).backgroundColor] : null;
    });
    check('plan: a red FAIL banner', banner && banner[0] === 'verdict fail' &&
      banner[1] === 'rgb(201, 42, 42)', JSON.stringify(banner));
    await checkReport(ctx, 'fixture', fixHtml, {
      charts: ['chart-throughput', 'chart-latency', 'chart-hdr', 'chart-status'],
      hdrSeries: 3,
      text: ['open loop', 'ramping-arrival-rate', 'Uncorrected', 'every request is accounted for'],
      notText: ['no per-second series'],
      screenshot: path.join(ARTIFACTS, 'report-fixture.png'),
    });
    await checkReport(ctx, 'no series', nsHtml, {
      charts: ['chart-hdr', 'chart-status'],
      hdrSeries: 3,
      text: ['no per-second series'],
      noSections: ['Steps', 'Checks', 'Thresholds'],
    });
    const hp = await checkReport(ctx, 'hostile', hHtml, {
      charts: ['chart-throughput', 'chart-latency', 'chart-hdr', 'chart-status'],
      hdrSeries: 3,
      sections: ['Steps', 'Checks', 'Thresholds'],
      text: ['Stopped early: </script><script>window.__pwned=1'],
    });
    const cp = await checkReport(ctx, 'controlled', cHtml, {
      charts: ['chart-throughput', 'chart-latency', 'chart-hdr', 'chart-status'],
      hdrSeries: 3,
      sections: ['Changes made while it ran (control)'],
      screenshot: path.join(ARTIFACTS, 'report-controlled.png'),
    });
    const marked = await cp.evaluate(() => [window.squallControls,
      window.squallCharts.filter((c) => c.marks).map((c) => c.id).sort().join(',')]);
    check('controlled: the changes are marked on the charts over time', marked[0] === 3 &&
      marked[1] === 'chart-latency,chart-throughput', JSON.stringify(marked));
    const pwned = await hp.evaluate(() => window.__pwned);
    check('hostile: no injected script or handler ran', pwned === undefined, pwned);
    const island = await hp.evaluate(() =>
      JSON.parse(document.getElementById('squall-data').textContent).result.config.url);
    check('hostile: the JSON island round-trips the URL', island === hostile.config.url, island);
    const title = await hp.title();
    check('hostile: the title shows the URL as text', title.includes('<img src=x'), title);
    const nScripts = await hp.evaluate(() => document.scripts.length);
    check('hostile: exactly three script elements', nScripts === 3, nScripts);
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    if (target) await stopTarget(target.proc);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e) => {
  check('test ran to the end', false, e && e.stack ? e.stack : String(e));
}).finally(() => {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
});
