// tests/browser/dashboard.test.mjs - the daemon's dashboard in a real browser.
//
// Starts `squall target` and `squall serve` (a temp store) on free loopback ports, opens the
// dashboard in headless Chromium (the Debian package, scripts/deps.sh browser) driven by
// playwright-core (npm, installed into the build tree's npm/ folder on first use), and does
// what a user would: start a run from the form against the target, watch the live chart update
// at least three times, stop it, find it in the list, open it (the HTML report, in its frame),
// start a second run and compare the two (percentile curves and the table of deltas); the New
// run tabs (only the chosen tab's form shows); every example the page shows (the plan box's, each
// quick field's) validates through POST /validate; the inbox
// page: stamped and unstamped webhooks posted to the daemon appear live with their matching and
// latency per path, the path filter, the clear button. Then a
// daemon with a token: the page asks for it once and keeps it for the tab. Throughout: no
// console error and no page error, nothing fetched from anywhere but the daemon. Screenshots
// land in build/artifacts/ (CI keeps them).
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
const TOKEN = 'dash-' + 'f00dfeedcafe1234'.repeat(2);

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

// Painted and chromatic pixels of one chart's canvas (see report.test.mjs).
async function chartPixels(frame, id) {
  return frame.evaluate((cid) => {
    const c = (window.squallDash || {}).charts?.find((x) => x.id === cid) ||
      (window.squallCharts || []).find((x) => x.id === cid);
    if (!c) return null;
    const cv = c.plot.ctx.canvas;
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    let chromatic = 0;
    for (let i = 0; i < d.length; i += 4 * 3) {
      if (d[i + 3] === 0) continue;
      const mx = Math.max(d[i], d[i + 1], d[i + 2]), mn = Math.min(d[i], d[i + 1], d[i + 2]);
      if (mx - mn > 60 && d[i + 3] > 128) chromatic++;
    }
    return { w: cv.width, h: cv.height, chromatic, points: c.plot.data[0].length,
      series: c.plot.series.length };
  }, id);
}

function watch(page, problems, requests, base, allow401) {
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (allow401 && /status of 401/.test(m.text())) return;
    problems.push('console: ' + m.text());
  });
  page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base) && !u.startsWith('data:') && !u.startsWith('about:') &&
        !u.startsWith('blob:')) requests.push(u);
  });
}

async function shot(page, name) {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file, fullPage: true });
  check(`screenshot ${name}`, fs.statSync(file).size > 10000);
}

async function fillRun(page, url, { name, duration, connections }) {
  await page.goto(url + '#/new');
  await page.waitForSelector('#quick-form');
  await page.fill('#run-name', name);
  await page.fill('#q-url', `http://127.0.0.1:${target.port}/fast`);
  await page.fill('#q-connections', String(connections));
  await page.fill('#q-duration', duration);
  await page.fill('#q-threads', '1');
  await page.click('#start-quick');
  await page.waitForFunction(() => /^#\/run\/\d+$/.test(location.hash), null, { timeout: 15000 });
  return Number((await page.evaluate(() => location.hash)).split('/')[2]);
}

let target = null;

async function main() {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`skipped: no Chromium at ${CHROMIUM} (scripts/deps.sh browser installs it)`);
    process.exit(77);
  }
  const { chromium } = loadPlaywright();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'squall-dashboard-'));
  let daemon = null, daemon2 = null, ctx = null;
  try {
    target = await startProc(['target', '--port', '0', '--threads', '1'],
      /^squall target listening on http:\/\/127\.0\.0\.1:(\d+)$/, 'squall target');
    daemon = await startProc(['serve', '--listen', '127.0.0.1:0', '--data', path.join(tmp, 'd1'),
      '--quiet'], /^squall serve listening on http:\/\/127\.0\.0\.1:(\d+)\/$/, 'squall serve');
    const base = `http://127.0.0.1:${daemon.port}/`;
    fs.mkdirSync(path.join(tmp, 'profile'));
    ctx = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
      executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 900 },
    });
    const page = await ctx.newPage();
    const problems = [], requests = [];
    watch(page, problems, requests, base, false);

    // 1. the empty list
    await page.goto(base);
    await page.waitForSelector('#no-runs', { timeout: 10000 });
    check('an empty store says so', true);

    // 2. a run from the form, watched live
    const id1 = await fillRun(page, base, { name: 'live run', duration: '30s', connections: 4 });
    check('the form started run ' + id1, id1 > 0);
    await page.waitForFunction(() => window.squallDash.liveUpdates >= 4, null, { timeout: 20000 })
      .catch(() => {});
    const updates = await page.evaluate(() => window.squallDash.liveUpdates);
    check('the live chart updated at least 3 times', updates >= 3, updates);
    const tp = await chartPixels(page, 'live-throughput');
    check('the live throughput chart has its seconds drawn', tp && tp.points >= 3 && tp.chromatic >= 20,
      JSON.stringify(tp));
    const lt = await chartPixels(page, 'live-latency');
    check('the live latency chart has its seconds drawn', lt && lt.points >= 3 && lt.chromatic >= 20,
      JSON.stringify(lt));
    const rps = await page.textContent('[data-tile="requests/s"] .v');
    check('the requests/s tile shows a figure', /^[\d,.]+$/.test(rps) && rps !== '0', rps);
    const counts = await page.textContent('#counts-line');
    check('the live status classes show 2xx', /^2xx [\d,]+/.test(counts), counts);
    const hdr = await page.textContent('#daemon-status');
    check('the header shows the run with its workers and VUs', hdr.includes(`run ${id1} running`) &&
      /1 workers · 4 VUs/.test(hdr), hdr);
    await shot(page, 'dashboard-live.png');

    // 2b. change it while it runs (POST /runs/{id}/control): VUs down, pause, resume; a rate
    //     for a closed loop is refused with the API's reason. Each change comes back as a live
    //     "control" event: a mark on the live charts and a line in the log.
    const said = () => page.textContent('#control-state');
    await page.fill('#control-vus', '2');
    await page.click('#control-vus-set');
    await page.waitForFunction(() => document.getElementById('control-state').textContent === '2 VUs',
      null, { timeout: 10000 }).catch(() => {});
    check('Set VUs: the run says 2 VUs', (await said()) === '2 VUs', await said());
    await page.click('#control-pause');
    await page.waitForFunction(() => document.getElementById('control-pause').textContent === 'Resume',
      null, { timeout: 10000 }).catch(() => {});
    check('Pause: the run says paused', (await said()) === 'paused', await said());
    await page.click('#control-pause');
    await page.waitForFunction(() => document.getElementById('control-pause').textContent === 'Pause',
      null, { timeout: 10000 }).catch(() => {});
    check('Resume: the run runs its 2 VUs again', (await said()) === '2 VUs', await said());
    const known = problems.length; /* the refusal's 400 is logged by the browser: expected */
    await page.fill('#control-rate', '100');
    await page.click('#control-rate-set');
    await page.waitForFunction(() => document.getElementById('control-state').className === 'bad',
      null, { timeout: 10000 }).catch(() => {});
    check('Set rate on a closed loop: the API\'s reason is shown', /closed loop/.test(await said()),
      await said());
    problems.push(...problems.splice(known).filter((m) => !/status of 400/.test(m)));
    await page.waitForFunction(() => window.squallDash.liveMarks === 3, null, { timeout: 10000 })
      .catch(() => {});
    const marks = await page.evaluate(() => [window.squallDash.liveMarks,
      document.querySelectorAll('#control-log li').length]);
    check('the three changes are marked on the live charts and logged', marks[0] === 3 && marks[1] === 3,
      JSON.stringify(marks));
    await shot(page, 'dashboard-control.png');

    // 3. stop it
    await page.click('#stop-run');
    await page.waitForSelector('.badge[data-status="stopped"]', { timeout: 20000 });
    check('Stop ends the run as stopped', true);
    await page.waitForSelector('#report-frame', { timeout: 10000 });

    // 4. find it in the list
    await page.goto(base + '#/runs');
    await page.waitForSelector(`tr[data-run="${id1}"] .badge[data-status="stopped"]`, { timeout: 10000 });
    const rowText = await page.textContent(`tr[data-run="${id1}"]`);
    check('the list shows the run with its name', rowText.includes('live run'), rowText);
    await shot(page, 'dashboard-list.png');

    // 5. open it: the HTML report, in its frame
    await page.click(`tr[data-run="${id1}"] a >> text=live run`);
    await page.waitForSelector('#report-frame', { timeout: 10000 });
    const frameEl = await page.$('#report-frame');
    const frame = await frameEl.contentFrame();
    await frame.waitForFunction(() => window.squallReady === true, null, { timeout: 15000 });
    const ids = await frame.evaluate(() => (window.squallCharts || []).map((c) => c.id).sort().join(','));
    check('the report shows its charts', ids === 'chart-client,chart-fine,chart-hdr,chart-latency,chart-status,chart-throughput', ids);
    const ctlN = await frame.evaluate(() => window.squallControls);
    check('the report has the run\'s three changes', ctlN === 3, ctlN);
    const hdrPx = await chartPixels(frame, 'chart-hdr');
    check('the report\'s percentile plot is drawn', hdrPx && hdrPx.chromatic >= 20, JSON.stringify(hdrPx));
    const sandbox = await page.getAttribute('#report-frame', 'sandbox');
    check('the report runs sandboxed (scripts only)', sandbox === 'allow-scripts', sandbox);
    await page.waitForFunction(() => document.getElementById('report-frame').offsetHeight > 1200,
      null, { timeout: 5000 }).catch(() => {});
    const fh = await page.evaluate(() => document.getElementById('report-frame').offsetHeight);
    check('the report\'s frame grew to its content', fh > 1200, fh);
    await shot(page, 'dashboard-run.png');

    // 6. a second run, then compare the two
    const id2 = await fillRun(page, base, { name: 'second', duration: '2s', connections: 1 });
    await page.waitForSelector('#report-frame', { timeout: 30000 });
    check('the second run finished and shows its report', true);
    await page.goto(base + '#/runs');
    await page.waitForSelector(`tr[data-run="${id2}"]`);
    await page.check(`tr[data-run="${id1}"] input[type=checkbox]`);
    await page.check(`tr[data-run="${id2}"] input[type=checkbox]`);
    await page.click('#compare-selected');
    await page.waitForSelector('#compare-table', { timeout: 10000 });
    const cmp = await chartPixels(page, 'compare-percentiles');
    check('compare draws both percentile curves', cmp && cmp.series === 3 && cmp.chromatic >= 20,
      JSON.stringify(cmp));
    const p99 = await page.textContent('#compare-table tr[data-key="latency.p99_us"]');
    check('compare lists p99 with its change', /p99.*%/.test(p99), p99);
    await shot(page, 'dashboard-compare.png');

    // 7. run it again: the same request, queued anew
    await page.goto(base + '#/run/' + id2);
    await page.waitForSelector('#run-again', { timeout: 10000 });
    await page.click('#run-again');
    await page.waitForFunction((old) => /^#\/run\/\d+$/.test(location.hash) &&
      location.hash !== '#/run/' + old, id2, { timeout: 10000 });
    const id3 = Number((await page.evaluate(() => location.hash)).split('/')[2]);
    check('Run again queued a new run', id3 > id2, id3);
    await page.waitForSelector('#report-frame', { timeout: 30000 });
    const again = await page.textContent('h1');
    check('the new run has the same name', again.includes('second'), again);

    // 8. the New run tabs: only the chosen tab's form shows
    await page.goto(base + '#/new');
    await page.waitForSelector('#quick-form');
    const shown = () => page.evaluate(() => ['quick-form', 'plan-form'].map((id) => {
      const el = document.getElementById(id);
      return el.getClientRects().length > 0 && getComputedStyle(el).display !== 'none';
    }).join());
    check('New run: the Quick tab shows the quick form only', (await shown()) === 'true,false',
      await shown());
    await page.click('#tab-plan');
    check('New run: the Plan tab shows the plan form only', (await shown()) === 'false,true',
      await shown());
    await page.click('#tab-quick');
    check('New run: back on Quick, the quick form only', (await shown()) === 'true,false',
      await shown());

    // 9. every example the page shows validates through the daemon (POST /validate): the plan
    //    box's example, and each quick field's (its placeholder, or the "e.g." in its label),
    //    each beside the URL example, so an example that stops validating fails here.
    await page.click('#tab-plan');
    const examples = await page.evaluate(() => {
      const out = [];
      const plan = document.getElementById('plan-text').placeholder;
      out.push({ what: 'the plan box\'s example', body: { plan, file: 'plan.yaml' } });
      const url = document.getElementById('q-url').placeholder;
      for (const el of document.querySelectorAll('#quick-form input, #quick-form textarea')) {
        if (!el.id.startsWith('q-') || el.type === 'checkbox') continue;
        const key = el.id.slice(2);
        const eg = /\(e\.g\. ([^)]+)\)/.exec(el.closest('label')?.textContent || '');
        const ex = eg ? eg[1] : el.placeholder;
        if (!ex || ex === '(none)') continue;
        const q = { url };
        q[key] = key === 'header' ? [ex] : el.type === 'number' ? Number(ex) : ex;
        out.push({ what: `the quick ${key} example ${JSON.stringify(ex)}`, body: { quick: q } });
      }
      return out;
    });
    check('the page shows a plan example and quick examples', examples.length >= 6,
      examples.map((e) => e.what).join(' | '));
    for (const ex of examples) {
      const r = await fetch(base + 'validate', { method: 'POST', body: JSON.stringify(ex.body),
        headers: { 'Content-Type': 'application/json' } });
      const j = await r.json().catch(() => ({}));
      check(`${ex.what} validates`, r.status === 200 && j.ok !== false,
        `${r.status} ${JSON.stringify(j).slice(0, 300)}`);
    }
    // ...and the plan example through the page's own Validate button
    await page.fill('#plan-text', await page.getAttribute('#plan-text', 'placeholder'));
    await page.click('#validate-plan');
    await page.waitForSelector('#form-message .note', { timeout: 10000 });
    check('Validate on the plan example says OK', await page.$('#form-message .note.ok') !== null,
      await page.textContent('#form-message'));

    // 10. the Validate button says what is wrong, where
    await page.goto(base + '#/new');
    await page.click('#tab-plan');
    await page.fill('#plan-text', 'target: [unclosed');
    await page.click('#validate-plan');
    await page.waitForSelector('#form-message .note', { timeout: 10000 });
    const vmsg = await page.textContent('#form-message');
    check('Validate shows the error', /plan/.test(vmsg) && vmsg.length > 10, vmsg);

    // 11. the inbox page: stamped and unstamped webhooks appear live, per-path matching and
    //    latency, the filter by path, the clear button
    await page.goto(base + '#/inbox');
    await page.waitForSelector('#inbox-live.dot:not(.off)', { timeout: 10000 });
    check('the inbox page follows the inbox\'s stream', true);
    const b36 = (v) => BigInt(v).toString(36);
    const sent = (BigInt(Date.now()) - 5n) * 1000000n; // sent 5 ms ago
    const hook = (p, body) => fetch(base + 'inbox' + p, { method: 'POST', body,
      headers: { 'Content-Type': 'application/json' } }).then((r) => r.status);
    const posted = [];
    for (const seq of [0, 1, 3, 1]) // seq 2 never sent: one gap; 1 twice: one duplicate
      posted.push(await hook('/hooks/paid', `{"s":"sq1.k.${b36(seq)}.${sent.toString(36)}"}`));
    posted.push(await hook('/other/ping', '{"ping":1}'));
    posted.push(await hook('/other/ping?x=2', '{"ping":2}'));
    check('the webhooks were answered 200', posted.every((x) => x === 200), posted.join(','));
    // live: the stream's events bring them (the page's fallback poll is every 5 s)
    const live = await page.waitForFunction(() =>
      document.querySelectorAll('#inbox-captures tr.capture-row').length === 6, null,
    { timeout: 4500 }).then(() => true, () => false);
    check('six captures appear live', live,
      await page.evaluate(() => document.querySelectorAll('#inbox-captures tr.capture-row').length));
    check('...through the SSE stream',
      await page.evaluate(() => window.squallDash.inboxEvents >= 1));
    await page.waitForFunction(() => {
      const r = document.querySelector('#inbox-paths tr[data-path="/hooks/paid"] td[data-k=count]');
      return r && r.textContent === '4';
    }, null, { timeout: 5000 }).catch(() => {});
    const cell = (p, k) => page.evaluate(([pp, kk]) => {
      const td = document.querySelector(`#inbox-paths tr[data-path="${pp}"] td[data-k=${kk}]`);
      return td ? td.textContent : null;
    }, [p, k]);
    const paid = {};
    for (const k of ['count', 'stamped', 'missing', 'duplicates', 'p50', 'max']) paid[k] = await cell('/hooks/paid', k);
    check('per path: count 4, stamped 4, missing 1, duplicates 1',
      paid.count === '4' && paid.stamped === '4' && paid.missing === '1' && paid.duplicates === '1',
      JSON.stringify(paid));
    check('per path: latency percentiles (sent 5 ms before)', /^[\d.]+(ms|s)$/.test(paid.p50) &&
      paid.max !== '—', JSON.stringify(paid));
    const ping = await cell('/other/ping', 'stamped');
    check('an unstamped path counts no stamp', ping === '0', ping);
    const stamps = await page.$$eval('#inbox-captures tr.capture-row td[data-k=stamp]',
      (tds) => tds.map((td) => td.textContent));
    check('each capture shows its stamp', stamps.includes('k #3') && stamps.includes('k #1 (duplicate)') &&
      stamps.filter((x) => x === '—').length === 2, stamps.join(' | '));
    check('the stamped stream is listed', await page.$('#inbox-streams tr[data-stream="k"]') !== null);
    await shot(page, 'dashboard-inbox.png');
    await page.fill('#inbox-filter', '/other');
    await page.press('#inbox-filter', 'Enter');
    await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('#inbox-captures tr.capture-row')];
      return location.hash.startsWith('#/inbox?path=') && rows.length === 2 &&
        rows.every((r) => r.dataset.path.startsWith('/other'));
    }, null, { timeout: 10000 }).then(() => check('the filter keeps /other\'s captures', true),
      (e) => check('the filter keeps /other\'s captures', false, e.message));
    check('the filter keeps /other\'s path row only',
      (await page.$$eval('#inbox-paths tr[data-path]', (r) => r.map((x) => x.dataset.path))).join() === '/other/ping');
    await page.waitForSelector('#inbox-live.dot:not(.off)', { timeout: 10000 });
    await page.click('#inbox-clear');
    await page.waitForSelector('#inbox-no-captures', { timeout: 10000 })
      .then(() => check('Clear empties the captures', true), (e) => check('Clear empties the captures', false, e.message));
    const kept = await page.textContent('#inbox-tiles [data-tile=stored] .v');
    check('...and the inbox keeps none', kept === '0', kept);
    await hook('/other/after', '{}');
    await hook('/hooks/hidden', '{}');
    const after = await page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('#inbox-captures tr.capture-row')];
      return rows.length === 1 && rows[0].dataset.path === '/other/after';
    }, null, { timeout: 4500 }).then(() => true, () => false);
    check('a capture after the clear appears live, filtered', after);

    check('no console or page error', problems.length === 0, problems.join(' | '));
    check('nothing fetched beyond the daemon', requests.length === 0, requests.join(' '));
    await page.close();

    // 12. a daemon with a token: the page asks once, and keeps it for the tab
    const tok = path.join(tmp, 'token');
    fs.writeFileSync(tok, TOKEN + '\n');
    daemon2 = await startProc(['serve', '--listen', '127.0.0.1:0', '--data', path.join(tmp, 'd2'),
      '--quiet', '--token-file', tok],
    /^squall serve listening on http:\/\/127\.0\.0\.1:(\d+)\/$/, 'squall serve --token-file');
    const base2 = `http://127.0.0.1:${daemon2.port}/`;
    const p2 = await ctx.newPage();
    const problems2 = [], requests2 = [];
    watch(p2, problems2, requests2, base2, true);
    await p2.goto(base2);
    await p2.waitForSelector('#token-modal:not([hidden])', { timeout: 10000 });
    check('the page asks for the token', true);
    await shot(p2, 'dashboard-token.png');
    await p2.fill('#token-input', TOKEN);
    await p2.click('#token-form button[type=submit]');
    await p2.waitForSelector('#no-runs', { timeout: 10000 });
    check('with the token the list loads', true);
    await p2.reload();
    await p2.waitForSelector('#no-runs', { timeout: 10000 });
    const asked = await p2.evaluate(() => !document.getElementById('token-modal').hidden);
    check('the token is kept for the tab (no second prompt)', !asked);
    check('token page: no console or page error', problems2.length === 0, problems2.join(' | '));
    check('token page: nothing fetched beyond the daemon', requests2.length === 0, requests2.join(' '));
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    for (const p of [daemon2, daemon, target]) {
      if (p) {
        const code = await stopProc(p.proc);
        if (p !== target) check('squall serve exits 0 on SIGTERM', code === 0, code);
      }
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e) => {
  check('test ran to the end', false, e && e.stack ? e.stack : String(e));
}).finally(() => {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
});
