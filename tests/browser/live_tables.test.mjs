// tests/browser/live_tables.test.mjs - the live tables of a run in progress, in a real browser.
//
// Starts `squall target` and `squall serve` (a temp store) on free loopback ports, queues a plan
// run with two request steps (one the target answers 404) and three thresholds (one fails on
// the running figures, one holds, one is tagged: judged at the end), opens the run's page in
// headless Chromium (playwright-core, as dashboard.test.mjs) and checks what a Locust or k6
// user looks at while it runs: the step table's request counts grow between two reads, a click
// on a header sorts it (both ways, then back to the plan's order), the failures panel shows the
// 404 with its step and its sampled exchange (redacted, markup kept as text), the failing threshold shows "fail" while the run is still running, the
// checks panel shows each check's passes and failures with its verdict (growing), the
// latency chart's log scale and percentile choices apply, and its "100 ms" view shows the
// running run's 100 ms bins (ten points a second, growing). Then a quick run (200 requests/s):
// one row, its URL. A screenshot of the panels
// (build/artifacts/dashboard-live-tables.png) and their boxes: visible, the table wide, the
// failures and thresholds side by side. The load is bounded (2 VUs with a 20 ms think, 30 s at
// most, stopped once checked) and goes to loopback only. No console error, nothing fetched from
// anywhere but the daemon.
//
// Environment (ctest sets it): SQUALL, SQ_NPM_DIR, SQ_ARTIFACTS, CHROMIUM (default
// /usr/bin/chromium). Exit 0 when every check passed, 1 when one failed, 77 (skipped) when
// there is no Chromium.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

// Starts SQUALL with args; resolves to { proc, port } once its first stdout line matches re.
function startProc(args, re, what) {
  return new Promise((resolve, reject) => {
    const proc = spawn(SQUALL, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${what} printed no listening line in 15 s`));
    }, 15000);
    proc.on('error', (e) => { clearTimeout(timer); reject(e); });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}) before listening: ${JSON.stringify(buf)}`));
    });
    proc.stdout.on('data', (chunk) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const m = re.exec(buf.slice(0, nl));
      clearTimeout(timer);
      proc.removeAllListeners('exit');
      proc.stdout.removeAllListeners('data');
      proc.stdout.resume();
      if (!m) {
        proc.kill('SIGKILL');
        reject(new Error(`unexpected first line ${JSON.stringify(buf.slice(0, nl))}`));
      } else {
        resolve({ proc, port: Number(m[1]) });
      }
    });
  });
}

function stopProc(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
    const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
    proc.once('exit', (code) => { clearTimeout(t); resolve(code); });
    process.kill(proc.pid, 'SIGTERM');
  });
}

function watch(page, problems, requests, base) {
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    problems.push('console: ' + m.text());
  });
  page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base) && !u.startsWith('data:') && !u.startsWith('about:') &&
        !u.startsWith('blob:')) requests.push(u);
  });
}


const SECRET = 'tok-live-7c1e9a';

function plan(port) {
  return `target: http://127.0.0.1:${port}
thresholds:
  http_req_failed: ["rate < 0.1"]
  http_req_duration: ["p(95) < 60000"]
  "http_req_duration{step:home}": ["p(99) < 60000"]
scenarios:
  browse:
    executor: constant-vus
    vus: 2
    duration: 30s
    flow:
      - name: home
        request: {url: /fast}
        check: {status: 200}
      - name: missing
        request:
          url: /nope
          headers: {Authorization: "Bearer ${SECRET}", X-Probe: "<img src=x onerror=window.__pwned=1>"}
        check: {status: 200}
      - think: 20ms
`;
}

async function api(base, method, p, body) {
  const r = await fetch(base + p.replace(/^\//, ''), {
    method, headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  return { status: r.status, doc: text ? JSON.parse(text) : null };
}

// The step table's rows as the page shows them: name -> { requests, failed } (numbers).
async function tableRows(page) {
  return page.$$eval('#live-rows tbody tr', (trs) => trs.map((tr) => {
    const cell = (k) => tr.querySelector(`td[data-col="${k}"]`).textContent;
    const n = (s) => Number(s.replace(/,/g, ''));
    return { key: tr.getAttribute('data-row'), requests: n(cell('requests')), failed: n(cell('failed')) };
  }));
}

async function main() {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`skipped: no Chromium at ${CHROMIUM} (scripts/deps.sh browser installs it)`);
    process.exit(77);
  }
  const { chromium } = loadPlaywright();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'squall-live-tables-'));
  let target = null, daemon = null, ctx = null, base = null, id = 0;
  try {
    target = await startProc(['target', '--port', '0', '--threads', '1'],
      /^squall target listening on http:\/\/127\.0\.0\.1:(\d+)$/, 'squall target');
    daemon = await startProc(['serve', '--listen', '127.0.0.1:0', '--data', path.join(tmp, 'd'),
      '--quiet'], /^squall serve listening on http:\/\/127\.0\.0\.1:(\d+)\/$/, 'squall serve');
    base = `http://127.0.0.1:${daemon.port}/`;
    fs.mkdirSync(path.join(tmp, 'profile'));
    ctx = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
      executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 900 },
    });
    const page = await ctx.newPage();
    const problems = [], requests = [];
    watch(page, problems, requests, base);

    const q = await api(base, 'POST', '/runs', { plan: plan(target.port), name: 'live tables' });
    check('the plan run is queued', q.status === 201, JSON.stringify(q.doc));
    id = q.doc.id;
    await page.goto(base + '#/run/' + id);
    await page.waitForSelector('#live-tables', { timeout: 15000 });
    await page.waitForFunction(() => window.squallLive.probe.updates >= 2, null, { timeout: 30000 });

    // 1. the table: a row per request step (the think step has none), counts that grow
    const first = await tableRows(page);
    check('the table has a row per request step',
      first.map((r) => r.key).join('|') === 'browse / home|browse / missing', JSON.stringify(first));
    const u0 = await page.evaluate(() => window.squallLive.probe.updates);
    await page.waitForFunction((n) => window.squallLive.probe.updates >= n + 2, u0, { timeout: 20000 });
    const second = await tableRows(page);
    check('the request counts grew between two reads',
      second.length === 2 && second[0].requests > first[0].requests &&
      second[1].requests > first[1].requests, JSON.stringify([first, second]));
    check('the 404 step counts its failures, the other none',
      second[1].failed > 0 && second[0].failed === 0, JSON.stringify(second));
    const cells = await page.$$eval('#live-rows tbody tr:first-child td', (tds) =>
      tds.map((td) => td.getAttribute('data-col') + '=' + td.textContent));
    check('each row shows req/s and p50/p95/p99/max',
      ['rps', 'p50_ms', 'p95_ms', 'p99_ms', 'max_ms'].every((k) =>
        cells.some((c) => c.startsWith(k + '=') && /\d/.test(c.slice(k.length + 1)))), cells.join(' '));

    // 2. sorting: a click on a header, twice (both ways), a third time (the plan's order)
    const order = async () => (await tableRows(page)).map((r) => r.key.split(' / ')[1]).join(',');
    await page.click('#live-rows th[data-sort="name"]');
    const asc = await order();
    const ariaAsc = await page.getAttribute('#live-rows th[data-sort="name"]', 'aria-sort');
    await page.click('#live-rows th[data-sort="name"]');
    const desc = await order();
    check('a click on "step / URL" sorts ascending, a second descending',
      asc === 'home,missing' && desc === 'missing,home' && ariaAsc === 'ascending', `${asc} / ${desc} / ${ariaAsc}`);
    await page.click('#live-rows th[data-sort="name"]');
    await page.click('#live-rows th[data-sort="failed"]');
    const byFail = await order();
    check('a click on "failures" puts the failing step first', byFail === 'missing,home', byFail);
    await page.waitForFunction((n) => window.squallLive.probe.updates >= n + 1,
      await page.evaluate(() => window.squallLive.probe.updates), { timeout: 20000 });
    check('the order holds across updates', (await order()) === 'missing,home', await order());

    // 3. the failures panel: the 404 with its step
    const f404 = await page.textContent('#live-failures li[data-kind="status 404"]').catch(() => null);
    check('the failures panel shows HTTP 404 with its count and step',
      f404 !== null && /HTTP 404/.test(f404) && /\d/.test(f404) && f404.includes('browse / missing'), f404);

    // 3b. the 404's sampled exchange, while the run goes: request, response head; redacted,
    // and its text shown as text (a header holding markup stays text)
    const smp = await page.$eval('#live-failures li[data-kind="status 404"] details[data-sample="4xx"]', (d) => {
      d.open = true;
      return { pre: d.querySelector('pre').textContent, summary: d.querySelector('summary').textContent,
        imgs: document.querySelectorAll('#live-failures img').length, pwned: window.__pwned === 1 };
    }).catch((e) => ({ error: String(e) }));
    check('the 404 shows its sampled exchange while the run goes (request line, response head)',
      smp.pre && smp.pre.startsWith('GET /nope HTTP/1.1') && /HTTP\/1\.1 404/.test(smp.pre) &&
      /HTTP 404/.test(smp.summary), JSON.stringify(smp));
    check('the sample is redacted (no credential on the page)',
      smp.pre && /Authorization:/.test(smp.pre) && !smp.pre.includes(SECRET) &&
      !(await page.content()).includes(SECRET), smp.pre);
    check('markup in the exchange stays text (no element, no script ran)',
      smp.pre && smp.pre.includes('<img src=x onerror=') && smp.imgs === 0 && !smp.pwned, JSON.stringify(smp));
    await page.waitForFunction((n) => window.squallLive.probe.updates >= n + 1,
      await page.evaluate(() => window.squallLive.probe.updates), { timeout: 20000 });
    check('an opened sample stays open across updates', await page.$eval(
      '#live-failures details[data-sample="4xx"]', (d) => d.open).catch(() => false));

    // 4. thresholds, before the run ends
    const ths = await page.$$eval('#live-thresholds tbody tr', (trs) =>
      trs.map((tr) => tr.getAttribute('data-threshold') + '=' + tr.getAttribute('data-ok')));
    const run = await api(base, 'GET', `/runs/${id}`);
    check('the run is still running while its thresholds are judged', run.doc.status === 'running', run.doc.status);
    check('the failing threshold shows fail, the holding one pass, the tagged one "at the end"',
      ths.includes('http_req_failed rate < 0.1=fail') &&
      ths.includes('http_req_duration p(95) < 60000=pass') &&
      ths.includes('http_req_duration{step:home} p(99) < 60000=end'), ths.join(' | '));
    const failNow = await page.textContent('#live-thresholds tr[data-ok="fail"] td.n');
    check('the failing threshold shows its current figure (about 0.5)', Math.abs(Number(failNow) - 0.5) < 0.1, failNow);

    // 4b. the checks, live: each with its passes and failures so far and a verdict
    const cks = await page.$$eval('#live-checks tbody tr', (trs) => trs.map((tr) => ({
      key: tr.getAttribute('data-check'), ok: tr.getAttribute('data-ok'),
      n: Array.from(tr.querySelectorAll('td.n')).map((td) => Number(td.textContent.replace(/,/g, ''))),
    })));
    check('the checks panel has each check: the passing one pass, the failing one fail',
      cks.length === 2 && cks[0].key === 'browse / home status 200' && cks[0].ok === 'pass' &&
      cks[0].n[0] > 0 && cks[0].n[1] === 0 && cks[1].key === 'browse / missing status 200' &&
      cks[1].ok === 'fail' && cks[1].n[0] === 0 && cks[1].n[1] > 0, JSON.stringify(cks));
    const ck0 = cks[0].n[0];
    await page.waitForFunction((n) => window.squallLive.probe.updates >= n + 1,
      await page.evaluate(() => window.squallLive.probe.updates), { timeout: 20000 });
    const ck1 = await page.textContent('#live-checks tr[data-ok="pass"] td.n');
    check('the passes grow while the run goes', Number(ck1.replace(/,/g, '')) > ck0, `${ck0} -> ${ck1}`);

    // 5. the latency chart: log scale, percentile lines
    const before = await page.evaluate(() => window.squallLive.probe.chart.scales.y.distr);
    await page.check('#lat-log');
    await page.uncheck('#lat-p99');
    await page.waitForFunction((n) => window.squallLive.probe.seconds >= n + 1,
      await page.evaluate(() => window.squallLive.probe.seconds), { timeout: 20000 });
    const ch = await page.evaluate(() => {
      const u = window.squallLive.probe.chart;
      return { distr: u.scales.y.distr, shown: u.series.map((s) => s.label + ':' + s.show).join(','),
        points: u.data[0].length };
    });
    check('the log scale applies (linear before)', before === 1 && ch.distr === 3, JSON.stringify([before, ch]));
    check('the chosen percentiles show, p99 not', ch.shown === 'second:true,p50:true,p90:true,p99:false,max:false',
      ch.shown);
    check('the chart has the seconds so far', ch.points >= 3, ch.points);

    // 5b. the 100 ms view while the run goes: ten points a second, the largest latency and the
    // responses, and it keeps growing; off again: the seconds and the chosen percentiles
    await page.check('#lat-fine');
    const f0 = await page.evaluate(() => {
      const u = window.squallLive.probe.chart;
      return { labels: u.series.map((s) => s.label).join(','), points: u.data[0].length,
        seconds: window.squallLive.probe.seconds, step: u.data[0][11] - u.data[0][10],
        resp: u.data[2].reduce((a, v) => a + (v || 0), 0), pctOff: document.getElementById('lat-p50').disabled };
    });
    check('"100 ms" shows ten points a second (the largest latency, the responses)',
      f0.labels === 'time,max,responses / 100 ms' && f0.points >= 10 * (f0.seconds - 1) &&
      Math.abs(f0.step - 0.1) < 1e-6 && f0.resp > 0 && f0.pctOff, JSON.stringify(f0));
    await page.waitForFunction((n) => window.squallLive.probe.chart.data[0].length >= n + 10,
      f0.points, { timeout: 20000 });
    check('the 100 ms view grows while the run goes', true);
    await page.uncheck('#lat-fine');
    const back = await page.evaluate(() => window.squallLive.probe.chart.series.map((s) => s.label + ':' + s.show).join(','));
    check('off again: the seconds with the chosen percentiles',
      back === 'second:true,p50:true,p90:true,p99:false,max:false', back);

    // 6. the screenshot and the panels' boxes
    const box = async (sel) => page.locator(sel).boundingBox();
    const tb = await box('#live-rows'), fb = await box('#live-failures-box'), thb = await box('#live-thresholds-box'),
      lb = await box('#live-latency-opts');
    check('the table is visible and wide', tb && tb.width > 800 && tb.height > 60, JSON.stringify(tb));
    check('failures and thresholds sit side by side below the table',
      fb && thb && Math.abs(fb.y - thb.y) < 2 && thb.x > fb.x + fb.width - 1 && fb.y > tb.y + tb.height - 1,
      JSON.stringify([fb, thb]));
    check('the latency chart is drawn below them', lb && lb.height >= 200 && lb.y > fb.y, JSON.stringify(lb));
    const file = path.join(ARTIFACTS, 'dashboard-live-tables.png');
    await page.locator('#live-tables').screenshot({ path: file });
    check('screenshot dashboard-live-tables.png', fs.statSync(file).size > 10000);

    await api(base, 'POST', `/runs/${id}/stop`);
    await page.waitForSelector('.badge[data-status="stopped"]', { timeout: 30000 });
    check('the run stopped', true);

    // 7. a quick run: one row, its URL; no failure, no threshold
    const qr = await api(base, 'POST', '/runs', { quick: { url: `http://127.0.0.1:${target.port}/fast`,
      connections: 1, threads: 1, duration: '20s', rate: 200 } });
    check('the quick run is queued', qr.status === 201, JSON.stringify(qr.doc));
    await page.goto(base + '#/run/' + qr.doc.id);
    await page.waitForSelector('#live-tables', { timeout: 15000 });
    await page.waitForFunction(() => window.squallLive.probe.updates >= 2, null, { timeout: 30000 });
    const qrows = await tableRows(page);
    check('a quick run has one row, its URL, with its requests',
      qrows.length === 1 && qrows[0].key === `http://127.0.0.1:${target.port}/fast` && qrows[0].requests > 0,
      JSON.stringify(qrows));
    const none = await page.textContent('#live-failures li');
    const qths = await page.textContent('#live-thresholds tbody');
    const qcks = await page.textContent('#live-checks tbody');
    check('a quick run has no checks', /no checks/.test(qcks), qcks);
    check('no failure so far, no thresholds', /No failure so far/.test(none) && /no thresholds/.test(qths),
      `${none} / ${qths}`);
    await api(base, 'POST', `/runs/${qr.doc.id}/stop`);
    await page.waitForSelector('.badge[data-status="stopped"]', { timeout: 30000 });
    check('no console error, no page error', problems.length === 0, problems.join(' | '));
    check('nothing fetched from anywhere but the daemon', requests.length === 0, requests.join(' '));
  } catch (e) {
    check('the test ran to its end', false, e.stack || String(e));
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    if (daemon) await stopProc(daemon.proc);
    if (target) await stopProc(target.proc);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main();
