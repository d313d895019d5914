// bench/ws_server.mjs - an independent WebSocket echo server: the npm `ws` package (8.x, the
// server most Node.js services run), for tests/e2e/test_ws.py and bench/ws.py. It echoes every
// message as it came (text or binary), answers pings (ws does that itself), and prints
// "listening on 127.0.0.1:PORT" once it accepts connections. permessage-deflate is off: squall
// offers no extension, and the echo should cost the server what a plain frame costs.
//
//   node bench/ws_server.mjs [PORT]        (PORT 0 or none: any free port)
//
// `ws` is installed on first use into the build tree's npm/ folder (SQ_NPM_DIR, default
// build/npm), as tests/browser/report.test.mjs does with playwright-core; nothing is committed.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NPM_DIR = path.resolve(process.env.SQ_NPM_DIR || path.join(root, 'build', 'npm'));

function loadWs() {
  const req = createRequire(path.join(NPM_DIR, 'package.json'));
  try {
    return req('ws');
  } catch {
    console.error(`installing ws into ${NPM_DIR}`);
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', NPM_DIR, 'ws@8'],
      { stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new Error('npm install ws@8 failed');
    return req('ws');
  }
}

const { WebSocketServer } = loadWs();
const port = Number(process.argv[2] || 0);
const wss = new WebSocketServer({ host: '127.0.0.1', port, perMessageDeflate: false,
  maxPayload: 1 << 20 });
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  ws.on('error', () => ws.terminate());
});
wss.on('listening', () => console.log(`listening on 127.0.0.1:${wss.address().port}`));
process.on('SIGTERM', () => process.exit(0));
