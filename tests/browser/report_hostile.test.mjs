// tests/browser/report_hostile.test.mjs - a report of a run against a hostile server, in Chromium.
//
// A small HTTP server of this test's own (node:http on 127.0.0.1, a port the kernel picks)
// answers every request with markup in its body and in its header values (a </script> that would
// close the report's data island, an <img onerror>, an HTML comment opener), half of them with
// status 500 so the report's Failures table and its sampled exchanges of both classes are
// filled. squall runs against it with markup in the URL, in a request header and in the run's
// name, writes --html directly and --json, and `squall report --html` renders the saved JSON
// again. Each page is opened from file:// in headless Chromium (playwright-core), every
// <details> opened, and checked:
//   - nothing of the data became an element or ran: no <img>, no element with an on* handler,
//     exactly the report's three <script> elements, window.__pwned never set;
//   - the data is there, as text: the hostile body and header in the sampled exchanges' <pre>;
//   - the report's own markup stays markup: the rendered text holds none of its tags
//     (</td>, <tr>, <th>, <details, <summary>, <pre>, <p class), and the Failures table's
//     http_req_failed row is a real row.
//
// Environment as for report.test.mjs: SQUALL, SQ_NPM_DIR, SQ_ARTIFACTS, CHROMIUM. Exit 0 when
// every check passed, 1 when one failed, 77 (skipped) without Chromium.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
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

// What the server and the command line put in the data. None holds a tag the report itself
// writes in a table or a sample (td, tr, th, details, summary, pre), so finding one of those
// as text means the report's own markup was escaped.
const BODY = '</script><script>window.__pwned="body script"</script>' +
  '<img src=x onerror="window.__pwned=\'body img\'"><!--<b>bold</b> & "quoted" \'single\'';
const RESP_HEADER = '<img src=x onerror="window.__pwned=\'response header\'"></script>';
const REQ_HEADER = '<script>window.__pwned="request header"</script><!--';
const URL_TAIL = '/p?q=<img/src=x/onerror=window.__pwned="url">&r=</script>';
const NAME = '<img src=x onerror="window.__pwned=\'name\'">run';
const OWN_TAGS = ['</td>', '<tr>', '<th>', '<td', '<details', '<summary>', '</summary>', '<pre>',
  '</pre>', '<p class', '<h3>'];

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
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', NPM_DIR,
      'playwright-core@1'], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error('npm install playwright-core@1 failed');
    return req('playwright-core');
  }
}

// The hostile server: every other response a 500, all with the same body and header.
function startServer() {
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(n++ % 2 ? 500 : 200, {
        'Content-Type': 'text/html; charset=utf-8',
        'X-Evil': RESP_HEADER,
        'Content-Length': Buffer.byteLength(BODY),
      });
      res.end(BODY);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// squall without blocking this process's event loop (the server above answers it).
function squall(args) {
  return new Promise((resolve) => {
    const p = spawn(SQUALL, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const t = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.stdout.on('data', (c) => { out += c; });
    p.stderr.on('data', (c) => { err += c; });
    p.on('close', (code) => { clearTimeout(t); resolve({ code, out, err }); });
  });
}

async function checkPage(ctx, name, file) {
  const page = await ctx.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  await page.waitForFunction(() => window.squallReady === true, null, { timeout: 10000 })
    .catch(() => problems.push('report.js never finished (window.squallReady unset)'));
  await page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = true; }));
  await page.waitForTimeout(100);
  check(`${name}: no console or page error`, problems.length === 0, problems.join(' | '));

  const dom = await page.evaluate(() => {
    const handlers = [...document.querySelectorAll('*')].filter((el) =>
      [...el.attributes].some((a) => a.name.startsWith('on'))).map((el) => el.outerHTML);
    return {
      pwned: window.__pwned,
      imgs: document.querySelectorAll('img').length,
      bold: document.querySelectorAll('b').length,
      scripts: document.scripts.length,
      handlers,
      text: document.body.innerText,
      samples: [...document.querySelectorAll('#samples pre')].map((p) => p.textContent),
      summaries: document.querySelectorAll('#samples details > summary').length,
      failedRow: [...document.querySelectorAll('th')].some((th) =>
        th.textContent === 'http_req_failed (k6: both)' &&
        th.nextElementSibling && th.nextElementSibling.tagName === 'TD' &&
        /^\d+\.\d\d%$/.test(th.nextElementSibling.textContent)),
      title: document.title,
      h1: document.querySelector('h1') ? document.querySelector('h1').textContent : '',
    };
  });
  check(`${name}: no injected script or handler ran`, dom.pwned === undefined, dom.pwned);
  check(`${name}: no <img> from the data`, dom.imgs === 0, `${dom.imgs} img elements`);
  check(`${name}: no <b> from the data`, dom.bold === 0, `${dom.bold} b elements`);
  check(`${name}: no element with an on* handler`, dom.handlers.length === 0,
    dom.handlers.join(' '));
  check(`${name}: exactly the report's three script elements`, dom.scripts === 3, dom.scripts);
  for (const t of OWN_TAGS) {
    const at = dom.text.indexOf(t);
    check(`${name}: the report's own "${t}" is not shown as text`, at < 0,
      at < 0 ? '' : JSON.stringify(dom.text.slice(Math.max(0, at - 80), at + 80)));
  }
  check(`${name}: the Failures table's http_req_failed row is a row`, dom.failedRow);
  check(`${name}: sampled exchanges of both classes, folded`, dom.summaries >= 2,
    `${dom.summaries} summaries`);
  const all = dom.samples.join('\n');
  check(`${name}: the hostile body is shown as text`, all.includes(BODY), all.slice(0, 300));
  check(`${name}: the hostile response header is shown as text`, all.includes(RESP_HEADER));
  check(`${name}: the hostile request header is shown as text`, all.includes(REQ_HEADER));
  check(`${name}: the URL is shown as text in the title`, dom.title.includes(URL_TAIL), dom.title);
  check(`${name}: the run's name is shown as text`, dom.h1.includes(NAME), dom.h1);
  await page.close();
}

async function main() {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`skipped: no Chromium at ${CHROMIUM} (scripts/deps.sh browser installs it)`);
    process.exit(77);
  }
  const { chromium } = loadPlaywright();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'squall-hostile-'));
  let server = null, ctx = null;
  try {
    server = await startServer();
    const url = `http://127.0.0.1:${server.address().port}${URL_TAIL}`;
    const json = path.join(tmp, 'hostile.json');
    const direct = path.join(ARTIFACTS, 'report-hostile-run.html');
    const run = await squall([url, '-n', '40', '-c', '2', '-t', '1', '-H', `X-Req: ${REQ_HEADER}`,
      '--name', NAME, '--json', json, '--html', direct, '-q']);
    check('the run against the hostile server exits 0', run.code === 0, run.err);
    const doc = JSON.parse(fs.readFileSync(json, 'utf8'));
    check('the result keeps sampled exchanges of 2xx and 5xx',
      (doc.sampled_exchanges?.classes || []).map((c) => c.class).join(',') === '2xx,5xx',
      JSON.stringify(doc.sampled_exchanges?.classes?.map((c) => c.class)));
    const again = path.join(ARTIFACTS, 'report-hostile-saved.html');
    const rep = await squall(['report', json, '--html', again]);
    check('squall report --html exits 0', rep.code === 0, rep.err);

    ctx = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
      executablePath: CHROMIUM, headless: true, args: ARGS,
      viewport: { width: 1280, height: 900 },
    });
    await checkPage(ctx, 'run --html', direct);
    await checkPage(ctx, 'report --html', again);
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    if (server) await new Promise((r) => server.close(r));
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e) => {
  check('test ran to the end', false, e && e.stack ? e.stack : String(e));
}).finally(() => {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
});
