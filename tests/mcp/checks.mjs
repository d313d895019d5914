// tests/mcp/checks.mjs - the checks both MCP test scripts (mcp.test.mjs over stdio, http.test.mjs
// over the daemon's POST /mcp) run through the SDK's client: resources and prompts. Each takes the
// script's own check(name, ok, detail).
import { isDeepStrictEqual } from 'node:util';

// Resources: the static ones, the run just made (its JSON is get_run's), the template, -32002.
export async function resourceChecks(check, client, runId, gotDoc) {
  const { resources } = await client.listResources();
  const uris = resources.map((r) => r.uri);
  for (const u of ['squall://caps', 'squall://docs/plans.md', 'squall://schema/result'])
    check(`resources/list names ${u}`, uris.includes(u), uris.join(','));
  const runUri = `squall://runs/${runId}`;
  const rr = resources.find((r) => r.uri === runUri);
  check('resources/list: the run made in this test, as JSON with a name and description',
    rr && rr.mimeType === 'application/json' && rr.name && /result document/.test(rr.description || ''),
    JSON.stringify(rr));
  const rd = await client.readResource({ uri: runUri });
  let doc = null;
  try { doc = JSON.parse(rd.contents?.[0]?.text); } catch { /* checked below */ }
  check('resources/read of the run: the same JSON as get_run', doc !== null && gotDoc &&
    isDeepStrictEqual(doc, gotDoc) && rd.contents[0].uri === runUri &&
    rd.contents[0].mimeType === 'application/json', (rd.contents?.[0]?.text || '').slice(0, 200));
  const caps = JSON.parse((await client.readResource({ uri: 'squall://caps' })).contents[0].text);
  check('squall://caps: the caps in force', caps.max_vus === 400 && caps.max_rate_per_s === 10000 &&
    caps.max_duration_s === 300, JSON.stringify(caps));
  const pm = await client.readResource({ uri: 'squall://docs/plans.md' });
  check('squall://docs/plans.md: the plan reference', pm.contents[0].mimeType === 'text/markdown' &&
    /executor/.test(pm.contents[0].text), pm.contents[0].text.slice(0, 100));
  const sc = JSON.parse((await client.readResource({ uri: 'squall://schema/result' })).contents[0].text);
  check('squall://schema/result: a JSON Schema', typeof sc.properties === 'object');
  const { resourceTemplates } = await client.listResourceTemplates();
  check('resources/templates/list: squall://runs/{id}', resourceTemplates.length === 1 &&
    resourceTemplates[0].uriTemplate === 'squall://runs/{id}', JSON.stringify(resourceTemplates));
  for (const uri of ['squall://runs/99999', 'squall://nothing']) {
    try {
      const r = await client.readResource({ uri });
      check(`resources/read ${uri}: -32002`, false, JSON.stringify(r).slice(0, 200));
    } catch (e) {
      check(`resources/read ${uri}: -32002`, e.code === -32002 && e.data?.uri === uri, `${e.code} ${e.message}`);
    }
  }
}

// Prompts: listed with their arguments, filled in, the run embedded, a missing argument refused.
export async function promptChecks(check, client, runId, url) {
  const { prompts } = await client.listPrompts();
  const names = prompts.map((p) => p.name).sort();
  check('prompts/list: the prompts', JSON.stringify(names) ===
    JSON.stringify(['find_capacity', 'investigate_run', 'load_test_endpoint']), names.join(','));
  const lt = prompts.find((p) => p.name === 'load_test_endpoint');
  check('load_test_endpoint takes url (required), rate, duration',
    JSON.stringify(lt?.arguments?.map((a) => [a.name, !!a.required])) ===
    JSON.stringify([['url', true], ['rate', false], ['duration', false]]), JSON.stringify(lt));
  const g = await client.getPrompt({ name: 'load_test_endpoint', arguments: { url, rate: '500', duration: '30s' } });
  const t = g.messages?.[0]?.content?.text || '';
  check('prompts/get load_test_endpoint: a user message naming the URL, run_load_test and the caps',
    g.messages[0].role === 'user' && t.includes(url) && t.includes('run_load_test') &&
    t.includes('squall://caps') && t.includes('"rate": 500') && t.includes('30s'), t.slice(0, 300));
  const ir = await client.getPrompt({ name: 'investigate_run', arguments: { run_id: String(runId) } });
  const emb = ir.messages?.[1]?.content;
  check('prompts/get investigate_run: the run resource embedded', emb?.type === 'resource' &&
    emb.resource.uri === `squall://runs/${runId}` && JSON.parse(emb.resource.text).schema === 'squall.result/1',
  JSON.stringify(ir).slice(0, 300));
  try {
    await client.getPrompt({ name: 'investigate_run', arguments: {} });
    check('prompts/get without a required argument: -32602', false);
  } catch (e) {
    check('prompts/get without a required argument: -32602', e.code === -32602, `${e.code} ${e.message}`);
  }
}
