// tests/mcp/http.test.mjs - the daemon's POST /mcp (streamable HTTP) against the official MCP
// TypeScript SDK.
//
// Starts `squall serve` on 127.0.0.1 (a fresh store in a temporary directory) and `squall target`
// (both stopped by PID at the end), then, with the SDK's Client over StreamableHTTPClientTransport:
// initialize (a session id is issued), tools/list, a bounded 2 s run_load_test checked against
// the target's /stats, the run in the daemon's store (GET /runs/ID), list_runs and get_run from
// the store, a second run and compare_runs, a health check answered while a long run is under
// way (a run does not block the daemon), stop_run on that long run (its call answers "stopped"),
// the caps. Then raw HTTP: no session id (400), an unknown one (404), a foreign Origin (403),
// GET /mcp (405), a bad MCP-Protocol-Version (400), a notification (202), DELETE ends the session
// (then 404).
//
// Environment (ctest sets it): SQUALL, SQ_NPM_DIR (as tests/mcp/mcp.test.mjs). Exit 0 when every
// check passed.

import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import { promptChecks, resourceChecks } from './checks.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const SQUALL = process.env.SQUALL || path.join(root, 'build', 'squall');
const NPM_DIR = process.env.SQ_NPM_DIR || path.join(root, 'build', 'npm');
const SDK = '@modelcontextprotocol/sdk';

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

function loadSdk() {
  const req = createRequire(path.join(NPM_DIR, 'package.json'));
  const get = () => ({
    Client: req(`${SDK}/client/index.js`).Client,
    StreamableHTTPClientTransport: req(`${SDK}/client/streamableHttp.js`).StreamableHTTPClientTransport,
  });
  try {
    return get();
  } catch {
    console.log(`installing ${SDK} into ${NPM_DIR}`);
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', NPM_DIR,
      `${SDK}@1`], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`npm install ${SDK}@1 failed`);
    const again = spawnSync(process.execPath, process.argv.slice(1), { stdio: 'inherit' });
    process.exit(again.status === null ? 1 : again.status);
  }
}

// Starts a squall process that prints "... listening on http://HOST:PORT..." first.
function startListening(args, what) {
  return new Promise((resolve, reject) => {
    const p = spawn(SQUALL, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const rl = readline.createInterface({ input: p.stdout });
    const timer = setTimeout(() => reject(new Error(`${what} did not start`)), 15000);
    rl.once('line', (line) => {
      clearTimeout(timer);
      const m = /listening on (http:\/\/[^\s/]+)/.exec(line);
      if (!m) reject(new Error(`${what}: ${line}`));
      else resolve({ proc: p, base: m[1] });
    });
    p.once('exit', (code) => reject(new Error(`${what} exited ${code}`)));
  });
}

function stopProc(p) {
  return new Promise((resolve) => {
    if (p.exitCode !== null) return resolve(p.exitCode);
    const t = setTimeout(() => p.kill('SIGKILL'), 10000);
    p.once('exit', (code) => {
      clearTimeout(t);
      resolve(code);
    });
    p.kill('SIGTERM');
  });
}

const text = (r) => (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function raw(base, { method = 'POST', body, headers = {} } = {}) {
  const h = { Accept: 'application/json, text/event-stream', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const r = await fetch(`${base}/mcp`, { method, headers: h,
    body: body === undefined ? undefined : JSON.stringify(body) });
  const t = await r.text();
  let j = null;
  try { j = JSON.parse(t); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text: t, json: j };
}

const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18',
  capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

async function main() {
  const { Client, StreamableHTTPClientTransport } = loadSdk();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'squall-mcphttp-'));
  const daemon = await startListening(['serve', '--listen', '127.0.0.1:0', '--data', dir, '-q'], 'squall serve');
  const target = await startListening(['target', '--port', '0', '--threads', '1'], 'squall target');
  const base = daemon.base, tbase = target.base;
  try {
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`));
    const client = new Client({ name: 'squall-mcp-http-test', version: '1.0.0' });
    await client.connect(transport);
    check('initialize: server info', client.getServerVersion()?.name === 'squall');
    check('initialize: a session id', /^[0-9a-f]{32}$/.test(transport.sessionId || ''), transport.sessionId);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['run_load_test', 'list_runs', 'get_run', 'compare_runs', 'stop_run'])
      check(`tools/list has ${n}`, names.includes(n), names.join(','));
    // the loopback cap names the daemon's own setting, not squall mcp's flag
    const rltd = tools.find((t) => t.name === 'run_load_test')?.description || '';
    check('run_load_test\'s description names squall serve --allow-host, not squall mcp\'s',
      rltd.includes('squall serve --allow-host HOST') && !rltd.includes('squall mcp'), rltd);

    const stats = async () => (await fetch(`${tbase}/stats`)).json();
    const s0 = await stats();
    const t0 = Date.now();
    const run = await client.callTool({ name: 'run_load_test', arguments: {
      quick: { url: `${tbase}/fast`, connections: 4, duration: '2s', threads: 1 } } },
    undefined, { timeout: 60000 });
    const secs = (Date.now() - t0) / 1000;
    check('run_load_test: not an error', run.isError !== true, text(run).slice(0, 300));
    const id1 = run.structuredContent?.run_id;
    const completed = run.structuredContent?.result?.requests?.completed;
    check('run_load_test: lasted about 2 s', secs >= 1.9 && secs < 15, `${secs}`);
    check('run_load_test: requests completed', completed > 100, `${completed}`);
    const s1 = await stats();
    const fast = s1.endpoints.fast - (s0.endpoints.fast || 0);
    check('the target saw the run', fast >= completed && fast <= completed + 4,
      `target ${fast}, result ${completed}`);
    const stored = await (await fetch(`${base}/runs/${id1}`)).json();
    check('the run is in the daemon\'s store', stored.status === 'finished' && stored.kind === 'quick',
      JSON.stringify(stored).slice(0, 300));

    const got = await client.callTool({ name: 'get_run', arguments: { id: id1 } });
    check('get_run: from the store', got.structuredContent?.result?.requests?.completed === completed &&
      got.structuredContent?.status === 'finished', text(got).slice(0, 200));
    check('initialize: resources and prompts capabilities',
      !!client.getServerCapabilities()?.resources && !!client.getServerCapabilities()?.prompts);
    await resourceChecks(check, client, id1, got.structuredContent?.result);
    await promptChecks(check, client, id1, `${tbase}/fast`);
    const r2 = await client.callTool({ name: 'run_load_test', arguments: {
      name: 'slow <one>', quick: { url: `${tbase}/delay/2`, connections: 2, duration: '1s', threads: 1 } } },
    undefined, { timeout: 60000 });
    const id2 = r2.structuredContent?.run_id;
    check('a second run', r2.isError !== true && id2 === id1 + 1, text(r2).slice(0, 200));
    const names12 = await Promise.all([id1, id2].map(async (i) =>
      (await (await fetch(`${base}/runs/${i}`)).json()).name));
    check('a run is named mcp, or by run_load_test\'s name', names12[0] === 'mcp' &&
      names12[1] === 'slow <one>', JSON.stringify(names12));

    // Progress over HTTP: a progress token (the SDK adds one for onprogress) and an Accept that
    // takes text/event-stream: the answer is an SSE stream, a notifications/progress each second.
    const progress = [];
    const pr = await client.callTool({ name: 'run_load_test', arguments: {
      quick: { url: `${tbase}/fast`, connections: 2, duration: '3s', threads: 1, rate: 200 } } },
    undefined, { timeout: 60000, onprogress: (p) => progress.push(p) });
    const id3 = pr.structuredContent?.run_id;
    check('progress over HTTP: the call still answers with its result', pr.isError !== true &&
      id3 === id2 + 1 && pr.structuredContent?.result?.requests?.completed > 0, text(pr).slice(0, 200));
    check('progress over HTTP: a notifications/progress each second, growing',
      progress.length >= 2 && progress.length <= 4 &&
      progress.every((p, i) => p.progress > 0 && p.total === 3 &&
        (i === 0 || p.progress > progress[i - 1].progress)) &&
      /requests completed/.test(progress[0]?.message || ''), JSON.stringify(progress));
    const lr = await client.callTool({ name: 'list_runs', arguments: {} });
    const runs = lr.structuredContent?.runs || [];
    check('list_runs: the runs from the store, newest first', runs.length === 3 &&
      runs[0].id === id3 && runs[1].id === id2 && runs[2].id === id1 && runs[2].status === 'finished',
    JSON.stringify(runs).slice(0, 300));
    const cmp = await client.callTool({ name: 'compare_runs', arguments: { a: id1, b: id2 } });
    const dl = cmp.structuredContent?.deltas;
    check('compare_runs: rps, p50/p90/p99, errors', dl && ['rps', 'p50_us', 'p90_us', 'p99_us', 'errors']
      .every((k) => typeof dl[k]?.delta === 'number'), JSON.stringify(cmp.structuredContent).slice(0, 300));
    check('compare_runs: /delay/2 is slower at p50 and fewer per second',
      dl?.p50_us?.delta > 1000 && dl?.rps?.delta < 0, JSON.stringify(dl));
    const nr = await client.callTool({ name: 'get_run', arguments: { id: 999 } });
    check('get_run: an unknown id is a tool error', nr.isError === true, text(nr));

    // A long run: the daemon stays responsive, and stop_run ends it.
    const tl = Date.now();
    const long = client.callTool({ name: 'run_load_test', arguments: {
      quick: { url: `${tbase}/fast`, connections: 2, duration: '60s', threads: 1, rate: 200 } } },
    undefined, { timeout: 90000 });
    let running = null;
    for (let i = 0; i < 100 && !running; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const h = await (await fetch(`${base}/health`)).json();
      if (h.run && h.run.elapsed_s >= 0.5) running = h.run; // under way: requests were sent
    }
    check('the daemon answers /health during the run', running !== null);
    const ping = Date.now();
    await client.ping();
    check('an MCP ping is answered during the run', Date.now() - ping < 2000, `${Date.now() - ping} ms`);
    const sr = await client.callTool({ name: 'stop_run', arguments: { id: running?.id } });
    check('stop_run: stopping', sr.isError !== true && sr.structuredContent?.status === 'stopping', text(sr));
    const lres = await long;
    const took = (Date.now() - tl) / 1000;
    check('the long run answers its call stopped, early', took < 20 &&
      text(lres).includes('stopped') && lres.structuredContent?.result?.requests?.completed > 0,
    `${took}s ${text(lres).slice(0, 200)}`);
    const sr2 = await client.callTool({ name: 'stop_run', arguments: { id: running?.id } });
    check('stop_run on an ended run: a tool error', sr2.isError === true && text(sr2).includes('nothing to stop'), text(sr2));

    // notifications/cancelled (the SDK sends it when a call is aborted) stops the call's run
    // (here a call answered as an SSE stream: it asked for progress).
    const ac = new AbortController();
    let cprog = 0;
    const cancelledCall = client.callTool({ name: 'run_load_test', arguments: {
      quick: { url: `${tbase}/fast`, connections: 2, duration: '60s', threads: 1, rate: 200 } } },
    undefined, { timeout: 90000, signal: ac.signal, onprogress: () => cprog++ }).catch((e) => e);
    let crun = null;
    for (let i = 0; i < 50 && !crun; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const h = await (await fetch(`${base}/health`)).json();
      if (h.run && h.run.id !== running?.id) crun = h.run;
    }
    ac.abort('the test cancels it');
    const cerr = await cancelledCall;
    check('an aborted call rejects on the client', cerr instanceof Error, String(cerr));
    let cst = null;
    for (let i = 0; i < 100 && crun; i++) {
      cst = await (await fetch(`${base}/runs/${crun.id}`)).json();
      if (cst.status !== 'running' && cst.status !== 'queued') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    check('notifications/cancelled stopped its run', cst?.status === 'stopped', JSON.stringify(cst).slice(0, 200));

    // The caps (nothing is queued).
    const capped = await client.callTool({ name: 'run_load_test', arguments: {
      quick: { url: `${tbase}/fast`, connections: 401, duration: '1s' } } });
    check('cap: max VUs', capped.isError === true && text(capped).includes('cap: max VUs 400'), text(capped));
    const far = await client.callTool({ name: 'run_load_test', arguments: {
      quick: { url: 'http://192.0.2.7/fast', duration: '1s' } } });
    check('cap: loopback, naming the daemon\'s setting', far.isError === true &&
      text(far).includes('loopback') && text(far).includes('squall serve --allow-host HOST') &&
      !text(far).includes('squall mcp'), text(far));
    const badName = await client.callTool({ name: 'run_load_test', arguments: {
      name: 7, quick: { url: `${tbase}/fast`, duration: '1s' } } }).catch((e) => e);
    check('a name that is not a string is refused', badName instanceof Error &&
      /name must be a string/.test(badName.message), String(badName?.message || JSON.stringify(badName)));
    const all = await (await fetch(`${base}/runs`)).json();
    check('no capped call reached the queue', (all.runs || []).length === 5, JSON.stringify(all).slice(0, 200));

    // Raw HTTP: the transport's rules.
    const sid = transport.sessionId;
    const list = { jsonrpc: '2.0', id: 7, method: 'tools/list' };
    let r = await raw(base, { body: list });
    check('no Mcp-Session-Id: 400', r.status === 400 && r.json?.error?.code === -32600, r.text);
    r = await raw(base, { body: list, headers: { 'Mcp-Session-Id': '0123456789abcdef0123456789abcdef' } });
    check('an unknown session: 404', r.status === 404, r.text);
    r = await raw(base, { body: list, headers: { 'Mcp-Session-Id': sid, Origin: 'http://evil.example' } });
    check('a foreign Origin: 403', r.status === 403, r.text);
    r = await raw(base, { body: list, headers: { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' } });
    check('an unknown MCP-Protocol-Version: 400', r.status === 400, r.text);
    r = await raw(base, { method: 'GET', headers: { 'Mcp-Session-Id': sid } });
    check('GET /mcp: 405 (no server stream)', r.status === 405 && /POST/.test(r.headers.get('allow') || ''), r.text);
    r = await raw(base, { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, headers: { 'Mcp-Session-Id': sid } });
    check('a notification: 202, no body', r.status === 202 && r.text === '', `${r.status} ${r.text}`);
    r = await raw(base, { body: list, headers: { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-06-18' } });
    check('tools/list with the session: 200 JSON', r.status === 200 &&
      (r.headers.get('content-type') || '').startsWith('application/json') && r.json?.result?.tools?.length >= 11, r.text.slice(0, 200));
    const runCall = (meta) => ({ jsonrpc: '2.0', id: 'p1', method: 'tools/call', params: { name: 'run_load_test',
      arguments: { quick: { url: `${tbase}/fast`, connections: 1, duration: '2s', threads: 1, rate: 50 } },
      ...(meta ? { _meta: meta } : {}) } });
    r = await raw(base, { body: runCall({ progressToken: 'tok-1' }), headers: { 'Mcp-Session-Id': sid } });
    const events = r.text.split('\n\n').filter((e) => e.trim()).map((e) => {
      const d = e.split('\n').find((l) => l.startsWith('data: '));
      return d ? JSON.parse(d.slice(6)) : null;
    });
    const last = events[events.length - 1];
    check('raw: a progress token and text/event-stream: an SSE answer, progress events, then the response',
      r.status === 200 && (r.headers.get('content-type') || '').startsWith('text/event-stream') &&
      events.length >= 2 && events.slice(0, -1).every((e) => e?.method === 'notifications/progress' &&
        e.params.progressToken === 'tok-1') && last?.id === 'p1' && last?.result?.structuredContent?.run_id > 0,
    r.text.slice(0, 400));
    r = await raw(base, { body: runCall({ progressToken: 'tok-2' }), headers: { 'Mcp-Session-Id': sid, Accept: 'application/json' } });
    check('raw: a progress token but Accept without text/event-stream: one JSON answer',
      r.status === 200 && (r.headers.get('content-type') || '').startsWith('application/json') &&
      r.json?.id === 'p1' && r.json?.result?.structuredContent?.run_id > 0, r.text.slice(0, 200));
    r = await raw(base, { body: '{"jsonrpc":"2.0","id":1', headers: { 'Mcp-Session-Id': sid } });
    check('a body that is a JSON string, not a message: -32600', r.json?.error?.code === -32600, r.text);
    r = await raw(base, { body: init });
    const sid2 = r.headers.get('mcp-session-id');
    check('a raw initialize opens another session', r.status === 200 && sid2 && sid2 !== sid, r.text.slice(0, 200));
    r = await raw(base, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid2 } });
    check('DELETE ends the session: 204', r.status === 204, `${r.status} ${r.text}`);
    r = await raw(base, { body: list, headers: { 'Mcp-Session-Id': sid2 } });
    check('the ended session: 404', r.status === 404, r.text);
    await client.close();
  } finally {
    const code = await stopProc(daemon.proc);
    check('squall serve stops cleanly on SIGTERM', code === 0, `exit ${code}`);
    await stopProc(target.proc);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (e) {
  check('the test ran to its end', false, e.stack);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
