// A web page in a headless Chromium (Debian's chromium-headless-shell) calls `kvserve serve` with fetch from
// another origin: with --cors-origin naming the page's origin the browser's preflight (the Authorization header
// makes one) is answered and the chat completion comes back; without the flag the browser refuses the call.
// Run by ctest (kvserve_browser_cors) with KVS_BINARY, KVS_DEFAULT_MODEL_PATH and KVS_CHROMIUM set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';

const binary = process.env.KVS_BINARY;
const modelPath = process.env.KVS_DEFAULT_MODEL_PATH;
const chromium = process.env.KVS_CHROMIUM;
if (!binary || !modelPath || !chromium) throw new Error('set KVS_BINARY, KVS_DEFAULT_MODEL_PATH and KVS_CHROMIUM');
const API_KEY = 'browser-key';

// `kvserve serve` on a free port; resolves with its port and the process.
async function startServer(extra) {
  const server = spawn(binary, ['serve', '-m', modelPath, '--port', '0', '--api-key', API_KEY, ...extra],
                       { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  server.stderr.on('data', (d) => { err += d; });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 60_000);
    server.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/on http:\/\/[^ ]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}: ${err}`)));
  });
  return { server, port };
}

// The page's origin: serves a page whose script calls the API and posts what happened back here.
async function startPage(apiPort) {  // apiPort(): the API's port, known once it started
  let report;
  const reported = new Promise((resolve) => { report = resolve; });
  const page = () => `<!doctype html><html><body><script>
    fetch('http://127.0.0.1:${apiPort()}/v1/chat/completions', {
      method: 'POST',
      headers: { 'Authorization': 'Bearer ${API_KEY}', 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 8, temperature: 0 }),
    }).then((r) => r.json()).then((j) => ({ ok: true, body: j }), (e) => ({ ok: false, error: String(e) }))
      .then((result) => fetch('/result', { method: 'POST', body: JSON.stringify(result) }));
  </script></body></html>`;
  const pages = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/result') {
      let body = '';
      req.on('data', (d) => { body += d; });
      req.on('end', () => { res.end('ok'); report(JSON.parse(body)); });
      return;
    }
    res.setHeader('Content-Type', 'text/html');
    res.end(page());
  });
  pages.listen(0, '127.0.0.1');
  await once(pages, 'listening');
  return { pages, origin: `http://127.0.0.1:${pages.address().port}`, reported };
}

// Opens the page in the headless browser until it reported (or 60 s).
async function browse(url, reported) {
  const browser = spawn(chromium, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
                                   `--user-data-dir=${process.env.TMPDIR ?? '/tmp'}/kvs-chromium-${process.pid}`, url],
                        { stdio: ['ignore', 'ignore', 'pipe'], detached: true });  // a group: its helpers too
  let err = '';
  browser.stderr.on('data', (d) => { err += d; });
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no report from the page: ${err}`)), 60_000);
  });
  try {
    return await Promise.race([reported, timeout]);
  } finally {
    clearTimeout(timer);
    process.kill(-browser.pid, 'SIGKILL');  // the browser and every helper process it started
  }
}

async function stop(server) {
  const exited = once(server, 'exit');
  server.kill('SIGTERM');
  const [code] = await exited;
  assert.equal(code, 0);
}

test('a page on another origin calls the API through the preflight when --cors-origin allows it', async () => {
  // The page server starts first (its origin goes to --cors-origin); the page it serves names the API's port.
  let apiPort = 0;
  const { pages, origin, reported } = await startPage(() => apiPort);
  const { server, port } = await startServer(['--cors-origin', origin]);
  apiPort = port;
  try {
    const result = await browse(origin + '/', reported);
    assert.equal(result.ok, true, result.error);
    assert.equal(result.body.object, 'chat.completion');
    assert.equal(typeof result.body.choices[0].message.content, 'string');
  } finally {
    pages.close();
    await stop(server);
  }
});

test('without --cors-origin the browser refuses the call', async () => {
  let apiPort = 0;
  const { pages, origin, reported } = await startPage(() => apiPort);
  const { server, port } = await startServer([]);
  apiPort = port;
  try {
    const result = await browse(origin + '/', reported);
    assert.equal(result.ok, false);
    assert.match(result.error, /TypeError/);
  } finally {
    pages.close();
    await stop(server);
  }
});
