// tests/mcp/mcp.test.mjs - `squall mcp` against the official MCP TypeScript SDK.
//
// The SDK's Client over its StdioClientTransport starts `squall mcp` and: initializes (protocol
// 2025-06-18, server info, tools capability), lists the tools and compiles every input schema
// with ajv (the SDK's own validator), starts a squall target through start_target, runs a 2 s
// bounded load at it and checks the result document against the target's own /stats, reads the
// run back with get_run and list_runs, hits every cap (each refused with the cap's name, and the
// target's counters prove nothing was sent), calls with malformed arguments and an unknown tool
// (-32602 through the SDK), and stops the target. Then raw lines on a second `squall mcp`: not
// JSON (-32700), a batch and a null id (-32600), an unknown method (-32601), a notification (no
// answer), ping.
//
// Environment (ctest sets it): SQUALL (the binary), SQ_NPM_DIR (build/npm: the SDK is installed
// there on first use, like the browser test's playwright-core). Exit 0 when every check passed,
// 1 when one failed.

import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';

import { promptChecks, resourceChecks } from './checks.mjs';
import { fileURLToPath } from 'node:url';

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
    StdioClientTransport: req(`${SDK}/client/stdio.js`).StdioClientTransport,
    McpError: req(`${SDK}/types.js`).McpError,
    Ajv: req('ajv'),
  });
  try {
    return get();
  } catch {
    console.log(`installing ${SDK} into ${NPM_DIR}`);
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', NPM_DIR,
      `${SDK}@1`], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`npm install ${SDK}@1 failed`);
    // Node keeps the failed lookups of this process: run the test again in a fresh one.
    const again = spawnSync(process.execPath, process.argv.slice(1), { stdio: 'inherit' });
    process.exit(again.status === null ? 1 : again.status);
  }
}

async function stats(base) {
  const r = await fetch(`${base}/stats`);
  return r.json();
}

const text = (r) => (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function expectCap(client, name, args, needle, base, before) {
  const r = await client.callTool({ name, arguments: args });
  check(`cap: ${needle} (${JSON.stringify(args).slice(0, 90)})`,
    r.isError === true && text(r).includes(needle), text(r));
}

async function expectRpcError(client, params, code, label) {
  try {
    const r = await client.callTool(params);
    check(`${label}: JSON-RPC error ${code}`, false, `answered ${JSON.stringify(r).slice(0, 200)}`);
  } catch (e) {
    check(`${label}: JSON-RPC error ${code}`, e.code === code, `${e.code} ${e.message}`);
  }
}

async function sdkChecks() {
  const { Client, StdioClientTransport, Ajv } = loadSdk();
  const transport = new StdioClientTransport({ command: SQUALL, args: ['mcp'], stderr: 'inherit' });
  const client = new Client({ name: 'squall-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  const sv = client.getServerVersion();
  check('initialize: server info', sv && sv.name === 'squall', JSON.stringify(sv));
  check('initialize: tools capability', !!client.getServerCapabilities()?.tools);
  check('initialize: instructions', (client.getInstructions() || '').includes('400'));
  check('initialize: resources and prompts capabilities',
    !!client.getServerCapabilities()?.resources && !!client.getServerCapabilities()?.prompts,
    JSON.stringify(client.getServerCapabilities()));

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check('tools/list: the tools', JSON.stringify(names) === JSON.stringify(
    ['compare_runs', 'get_run', 'inbox_read', 'inbox_start', 'inbox_stop', 'list_runs',
      'run_load_test', 'start_target', 'stop_run', 'stop_target', 'validate_plan']),
  names.join(','));
  const ajv = new Ajv({ strict: false, allErrors: true });
  const validators = {};
  for (const t of tools) {
    let ok = true, why = '';
    try {
      validators[t.name] = ajv.compile(t.inputSchema);
    } catch (e) {
      ok = false;
      why = e.message;
    }
    check(`schema of ${t.name} compiles`, ok && t.inputSchema.type === 'object', why);
  }
  const rlt = tools.find((t) => t.name === 'run_load_test');
  for (const cap of ['400 VUs', '10,000 requests/s', '5 minutes', 'loopback', '--allow-host'])
    check(`run_load_test's description names the cap '${cap}'`, rlt.description.includes(cap));
  const v = validators.run_load_test;
  check('schema: a quick call validates', v({ quick: { url: 'http://127.0.0.1:1/', connections: 4 } }));
  check('schema: a plan call validates', v({ plan: 'target: x' }));
  check('schema: a named call validates', v({ name: 'smoke', quick: { url: 'x' } }));
  check('description: the loopback cap names squall mcp --allow-host',
    rlt.description.includes('squall mcp --allow-host HOST'), rlt.description);
  check('schema: both refused', !v({ quick: { url: 'x' }, plan: 'x' }));
  check('schema: 401 connections refused', !v({ quick: { url: 'x', connections: 401 } }));
  check('schema: stop_target needs a port', !validators.stop_target({}));

  const st = await client.callTool({ name: 'start_target', arguments: { threads: 1 } });
  const port = st.structuredContent?.port;
  const base = st.structuredContent?.url;
  check('start_target: a port and a URL', port > 0 && base === `http://127.0.0.1:${port}`, text(st));
  const s0 = await stats(base);
  check('the target answers /stats', typeof s0.requests === 'number');

  const t0 = Date.now();
  const progress = [];
  const run = await client.callTool({ name: 'run_load_test', arguments: { name: 'first',
    quick: { url: `${base}/fast`, connections: 4, duration: '2s', threads: 1 } } },
  undefined, { timeout: 60000, onprogress: (p) => progress.push(p) });
  const secs = (Date.now() - t0) / 1000;
  check('progress: a notification each second of the run', progress.length >= 1 && progress.length <= 3 &&
    progress.every((p, i) => p.total === 2 && p.progress > 0 && (i === 0 || p.progress > progress[i - 1].progress)) &&
    /requests completed/.test(progress[0]?.message || ''), JSON.stringify(progress));
  check('run_load_test: not an error', run.isError !== true, text(run).slice(0, 300));
  const doc = run.structuredContent?.result;
  const completed = doc?.requests?.completed;
  check('run_load_test: a result document', doc?.schema === 'squall.result/1', JSON.stringify(doc).slice(0, 200));
  check('run_load_test: lasted about 2 s', secs >= 1.9 && secs < 10, `${secs}`);
  check('run_load_test: requests completed', completed > 100, `${completed}`);
  check('run_load_test: the run id and the summary text', /^run 1\n/.test(text(run)) && text(run).length > 100,
    text(run).slice(0, 300));
  const s1 = await stats(base);
  const fast = s1.endpoints.fast - (s0.endpoints.fast || 0);
  check('the target saw the run (its /fast count covers the completed requests)',
    fast >= completed && fast <= completed + 4, `target ${fast}, result ${completed}`);

  const got = await client.callTool({ name: 'get_run', arguments: { id: run.structuredContent.run_id } });
  check('get_run: the same result', got.structuredContent?.result?.requests?.completed === completed);
  const lr = await client.callTool({ name: 'list_runs', arguments: {} });
  check('list_runs: one run', lr.structuredContent?.runs?.length === 1 &&
    lr.structuredContent.runs[0].kind === 'quick', JSON.stringify(lr.structuredContent));

  await resourceChecks(check, client, run.structuredContent.run_id, got.structuredContent?.result);
  await promptChecks(check, client, run.structuredContent.run_id, `${base}/fast`);

  // Cancellation: the SDK aborts a call (notifications/cancelled); squall mcp reads stdin during
  // the run, stops it, and sends no response for it (a late one would reach client.onerror as
  // "a response for an unknown message ID"). The next call is served only after the run ended.
  const sdkErrors = [];
  client.onerror = (e) => sdkErrors.push(String(e?.message || e));
  const ac = new AbortController();
  let seen = 0;
  const tc = Date.now();
  const cerr = await client.callTool({ name: 'run_load_test', arguments: { quick: {
    url: `${base}/fast`, connections: 2, duration: '60s', threads: 1, rate: 200 } } },
  undefined, { timeout: 90000, signal: ac.signal,
    onprogress: () => { if (++seen === 1) ac.abort('the test cancels it'); } }).catch((e) => e);
  check('cancel: the aborted call rejects on the client after a progress notification',
    cerr instanceof Error && seen >= 1, String(cerr));
  const after = await client.callTool({ name: 'list_runs', arguments: {} });
  const took = (Date.now() - tc) / 1000;
  check('cancel: the 60 s run stopped early (the next call answered within 20 s)', took < 20 &&
    after.structuredContent?.runs?.length === 2, `${took}s ${text(after).slice(0, 100)}`);
  const sx = await stats(base);
  await new Promise((r) => setTimeout(r, 1000));
  const sy = await stats(base);
  check('cancel: the target gets nothing more', sy.endpoints.fast === sx.endpoints.fast,
    `${sx.endpoints.fast} -> ${sy.endpoints.fast}`);
  await client.ping();
  check('cancel: no response came for the cancelled request',
    !sdkErrors.some((e) => /unknown message ID/.test(e)), sdkErrors.join('; ').slice(0, 400));
  // A request cancelled while it waits behind a run is dropped: never handled, never answered.
  const nerr = sdkErrors.length;
  const acq = new AbortController();
  const slow = client.callTool({ name: 'run_load_test', arguments: { quick: {
    url: `${base}/fast`, connections: 1, duration: '2s', threads: 1, rate: 50 } } },
  undefined, { timeout: 60000 });
  const queued = client.callTool({ name: 'list_runs', arguments: {} }, undefined,
    { signal: acq.signal }).catch((e) => e);
  await new Promise((r) => setTimeout(r, 500));
  acq.abort('cancelled while queued');
  await queued;
  const sres = await slow;
  await client.ping();
  check('cancel: a request cancelled while queued behind a run is never answered',
    sres.isError !== true && !sdkErrors.slice(nerr).some((e) => /unknown message ID/.test(e)),
    sdkErrors.slice(nerr).join('; ').slice(0, 400));
  const s1b = await stats(base);

  const u = `${base}/fast`;
  const plan = (vus, extra = '') => `target: ${base}\nscenarios:\n  a:\n    executor: constant-vus\n` +
    `    vus: ${vus}\n    duration: 1s\n${extra}    flow:\n      - request: {url: /fast}\n`;
  await expectCap(client, 'run_load_test', { quick: { url: u, connections: 401, duration: '1s' } }, 'cap: max VUs 400');
  await expectCap(client, 'run_load_test', { quick: { url: u, connections: 200, http2: true, streams: 3, duration: '1s' } }, 'cap: max VUs 400');
  await expectCap(client, 'run_load_test', { plan: plan(401) }, 'cap: max VUs 400');
  await expectCap(client, 'run_load_test', { quick: { url: u, rate: 10001, duration: '1s' } }, 'cap: max rate 10000/s');
  await expectCap(client, 'run_load_test', { quick: { url: u, rate: 100, stages: '1s:100,1s:50000' } }, 'cap: max rate 10000/s');
  await expectCap(client, 'run_load_test', { quick: { url: u, duration: '6m' } }, 'cap: max duration 5m');
  await expectCap(client, 'run_load_test', { plan: plan(1).replace('duration: 1s', 'duration: 301s') }, 'cap: max duration 5m');
  await expectCap(client, 'run_load_test', { quick: { url: `http://192.0.2.7:${port}/fast`, duration: '1s' } }, 'cap: targets only on loopback');
  await expectCap(client, 'run_load_test', { quick: { url: u, duration: '1s', 'connect-to': `127.0.0.1:${port}:192.0.2.7:${port}` } }, 'cap: targets only on loopback');
  await expectCap(client, 'run_load_test', { plan: plan(1).replace(base, 'http://example.com') }, 'cap: targets only on loopback');
  const s2 = await stats(base);
  check('no capped call sent a request', s2.endpoints.fast === s1b.endpoints.fast,
    `${s1b.endpoints.fast} -> ${s2.endpoints.fast}`);

  const bad = await client.callTool({ name: 'run_load_test', arguments: { quick: { url: u, connections: 'many' } } });
  check('a bad quick option: a tool error naming the flag', bad.isError === true && text(bad).includes('connections'), text(bad));
  const badPlan = await client.callTool({ name: 'validate_plan', arguments: { plan: 'target: [' } });
  check('validate_plan: a broken plan names its line', badPlan.isError === true && /plan\.yaml:\d+/.test(text(badPlan)), text(badPlan));
  const okPlan = await client.callTool({ name: 'validate_plan', arguments: { plan: plan(2) } });
  check('validate_plan: a good plan', okPlan.isError !== true && text(okPlan).includes('plan OK'), text(okPlan));
  await expectRpcError(client, { name: 'run_load_test', arguments: { quick: 'x' } }, -32602, 'quick not an object');
  await expectRpcError(client, { name: 'run_load_test', arguments: {} }, -32602, 'neither quick nor plan');
  await expectRpcError(client, { name: 'get_run', arguments: { id: 'one' } }, -32602, 'get_run with a string id');
  await expectRpcError(client, { name: 'no_such_tool', arguments: {} }, -32602, 'an unknown tool');

  // A webhook inbox: a bounded run posts to it; inbox_read returns what came.
  const ib = await client.callTool({ name: 'inbox_start', arguments: { max_captures: 100, status: 202 } });
  const iport = ib.structuredContent?.port;
  check('inbox_start: a port', iport > 0, text(ib));
  const posts = await client.callTool({ name: 'run_load_test', arguments: { quick: {
    url: `http://127.0.0.1:${iport}/hooks/a`, method: 'POST', body: '{"event":"paid"}',
    header: ['Content-Type: application/json'], connections: 2, requests: 40, threads: 1 } } });
  check('a run posts to the inbox', posts.isError !== true &&
    posts.structuredContent?.result?.requests?.completed === 40, text(posts).slice(0, 200));
  const rd = await client.callTool({ name: 'inbox_read', arguments: { port: iport, since: 0, limit: 1000 } });
  const caps = rd.structuredContent?.captures || [];
  check('inbox_read: every post captured', caps.length === 40 && rd.structuredContent.captured === 40,
    text(rd));
  check('inbox_read: method, path, body, headers', caps[0]?.method === 'POST' &&
    caps[0]?.path === '/hooks/a' && caps[0]?.body === '{"event":"paid"}' &&
    caps[0]?.headers.some(([k, v]) => k === 'Content-Type' && v === 'application/json'),
  JSON.stringify(caps[0]));
  const ist = await client.callTool({ name: 'inbox_stop', arguments: { port: iport } });
  check('inbox_stop', ist.isError !== true, text(ist));
  await expectRpcError(client, { name: 'inbox_read', arguments: {} }, -32602, 'inbox_read without a port');

  const stop = await client.callTool({ name: 'stop_target', arguments: { port } });
  check('stop_target', stop.isError !== true, text(stop));
  let refused = false;
  try {
    await fetch(`${base}/stats`);
  } catch {
    refused = true;
  }
  check('the target is gone', refused);
  await client.close();
}

// Raw lines on squall mcp's stdin: the codes the SDK never sends.
async function rawChecks() {
  const proc = spawn(SQUALL, ['mcp'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = readline.createInterface({ input: proc.stdout });
  const lines = [];
  let wake = null;
  rl.on('line', (l) => { lines.push(l); if (wake) wake(); });
  const next = () => new Promise((resolve, reject) => {
    const take = () => { wake = null; clearTimeout(timer); resolve(JSON.parse(lines.shift())); };
    const timer = setTimeout(() => reject(new Error('no answer in 10 s')), 10000);
    if (lines.length) take(); else wake = take;
  });
  const send = (s) => proc.stdin.write(s + '\n');
  const cases = [
    ['not JSON', '{"jsonrpc": "2.0", "id": 1, "method": ', -32700, null],
    ['a batch', '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, null],
    ['a null id', '{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, null],
    ['jsonrpc 1.0', '{"jsonrpc":"1.0","id":5,"method":"ping"}', -32600, 5],
    ['an unknown method', '{"jsonrpc":"2.0","id":"m","method":"no/such"}', -32601, 'm'],
    ['tools/call without a name', '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}', -32602, 6],
  ];
  send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
  for (const [label, line, code, id] of cases) {
    send(line);
    const r = await next();
    check(`raw: ${label} -> ${code}`, r.error?.code === code && r.id === id, JSON.stringify(r));
  }
  send('{"jsonrpc":"2.0","id":8,"method":"ping","params":{"pad":"' + 'x'.repeat(5 << 20) + '"}}');
  const big = await next();
  check('raw: a line over 4 MiB -> -32600', big.error?.code === -32600 && big.id === null, JSON.stringify(big));
  send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}');
  send('{"jsonrpc":"2.0","id":7,"method":"ping"}');
  const p = await next();
  check('raw: the notifications got no answer, ping did', p.id === 7 && p.result !== undefined, JSON.stringify(p));
  proc.stdin.end();
  const code = await new Promise((resolve) => proc.on('exit', resolve));
  check('raw: EOF ends squall mcp with status 0', code === 0, `${code}`);
}

try {
  await sdkChecks();
  await rawChecks();
} catch (e) {
  check('no exception', false, e.stack || String(e));
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
