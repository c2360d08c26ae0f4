// `kvserve serve` driven by the official OpenAI Node client: completions, chat, streaming, errors (also under
// mpirun with the model split over two ranks).
// Run by ctest (kvserve_server_js) with KVS_BINARY and KVS_DEFAULT_MODEL_PATH set; dependencies
// come from `npm ci` in this folder (`make js-deps`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (e) {
  throw new Error(`the 'openai' package is missing: run 'make js-deps' (npm ci in tests/js) first (${e.message})`);
}

const binary = process.env.KVS_BINARY;
const modelPath = process.env.KVS_DEFAULT_MODEL_PATH;
if (!binary || !modelPath) throw new Error('set KVS_BINARY and KVS_DEFAULT_MODEL_PATH (ctest does)');

const API_KEY = 'js-test-key';
const PROMPT = 'Once upon a time';
let server;
let client;
let stdout = '';
let stderr = '';
let servingPid = 0;  // the process that serves (under a launcher, rank 0: mpirun itself ends a job it is signalled to end with status 1)

// KVS_SERVER_LAUNCHER (e.g. "mpirun -np 2") and KVS_SERVER_ARGS (e.g. "--tp 2"): the same tests against a server
// started another way (ctest's kvserve_server_js_mpi: tensor parallelism over two MPI ranks).
const launcher = (process.env.KVS_SERVER_LAUNCHER ?? '').split(' ').filter((a) => a);
const extraArgs = (process.env.KVS_SERVER_ARGS ?? '').split(' ').filter((a) => a);

before(async () => {
  const argv = [...launcher, binary, 'serve', '-m', modelPath, '--port', '0', '--api-key', API_KEY, ...extraArgs];
  server = spawn(argv[0], argv.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stderr.on('data', (d) => { stderr += d; });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${stderr}`)), 60_000);
    server.stdout.on('data', (d) => {
      stdout += d;
      const m = stdout.match(/on http:\/\/[^ ]+:(\d+).*pid (\d+)/);
      if (m) {
        servingPid = Number(m[2]);
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
  });
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 120_000 });
});

after(async () => {
  if (!server || server.exitCode !== null) return;
  const exited = once(server, 'exit');
  if (launcher.length > 0) {
    process.kill(servingPid, 'SIGTERM');  // rank 0 shuts down, tells the other ranks to stop, and the job ends
  } else {
    server.kill('SIGTERM');
  }
  const [code, signal] = await exited;
  assert.equal(signal, null, `server killed by ${signal}`);
  assert.equal(code, 0, `server exit code ${code}; stderr: ${stderr}`);
});

// What `kvserve run --temp 0` prints after the prompt.
function runGreedy(prompt, maxTokens) {
  const r = spawnSync(binary, ['run', '-m', modelPath, '-p', prompt, '-n', String(maxTokens), '--temp', '0'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.stdout.startsWith(prompt), r.stdout);
  return r.stdout.slice(prompt.length).replace(/\n$/, '');
}

test('models.list names the served model', async () => {
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  assert.deepEqual(models, ['stories260K']);
});

test('greedy completion equals kvserve run --temp 0', async () => {
  const expected = runGreedy(PROMPT, 30);
  assert.ok(expected.startsWith(', there was a little girl named Lily.'), expected);
  const r = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 30, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, expected);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('a repeated chat comes from the prefix cache, as usage.prompt_tokens_details.cached_tokens says', async () => {
  const messages = [{ role: 'system', content: 'You tell short stories about animals in the forest.' },
                    { role: 'user', content: 'Tell me about a fox and a bird.' }];
  const first = await client.chat.completions.create({ messages, max_tokens: 8, temperature: 0 });
  const second = await client.chat.completions.create({ messages, max_tokens: 8, temperature: 0 });
  assert.equal(second.choices[0].message.content, first.choices[0].message.content);
  assert.equal(second.usage.prompt_tokens, first.usage.prompt_tokens);
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, second.usage.prompt_tokens - 1);
});

test('streamed completion concatenates to the same text, with a usage chunk', async () => {
  const whole = await client.completions.create({ model: 'stories260K', prompt: PROMPT, max_tokens: 40, temperature: 0 });
  const stream = await client.completions.create({
    model: 'stories260K', prompt: PROMPT, max_tokens: 40, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(chunks > 2, `only ${chunks} chunks`);
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('chat completion, whole and streamed', async () => {
  const messages = [
    { role: 'system', content: 'You tell short stories.' },
    { role: 'user', content: 'Tell me a story.' },
  ];
  const r = await client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 24, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.usage.completion_tokens <= 24);

  const stream = await client.chat.completions.create({
    model: 'stories260K', messages, max_tokens: 24, temperature: 0, stream: true,
  });
  let content = '';
  let role = null;
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    const choice = chunk.choices[0];
    role = choice.delta.role ?? role;
    content += choice.delta.content ?? '';
    finish = choice.finish_reason ?? finish;
  }
  assert.equal(role, 'assistant');
  assert.equal(content, r.choices[0].message.content);
  assert.equal(finish, r.choices[0].finish_reason);
});

test('seeded sampling is reproducible', async () => {
  const request = { model: 'stories260K', prompt: 'Lily', max_tokens: 30, temperature: 1.0, seed: 42 };
  const a = await client.completions.create(request);
  const b = await client.completions.create(request);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

test('chat with n = 3 returns three choices, each what a request with seed + i draws, whole and streamed', async () => {
  const request = {
    model: 'stories260K', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 20,
    temperature: 1.0, seed: 7,
  };
  const separate = [];
  for (let i = 0; i < 3; ++i) {
    separate.push((await client.chat.completions.create({ ...request, seed: 7 + i })).choices[0].message.content);
  }
  const r = await client.chat.completions.create({ ...request, n: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(r.choices.map((c) => c.message.content), separate);
  const stream = await client.chat.completions.create({ ...request, n: 3, stream: true });
  const streamed = ['', '', ''];
  for await (const chunk of stream) {
    for (const c of chunk.choices) streamed[c.index] += c.delta.content ?? '';
  }
  assert.deepEqual(streamed, separate);
});

test('bad requests raise the client errors with the server message', async () => {
  await assert.rejects(client.completions.create({ model: 'stories260K', prompt: PROMPT, n: 2, best_of: 1 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.constructor.name, 'BadRequestError');
    assert.equal(e.param, 'best_of');
    assert.match(e.message, /at least 'n'/);
    return true;
  });
  await assert.rejects(client.completions.create({ model: 'gpt-4o', prompt: PROMPT }), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  await assert.rejects(
    client.completions.create({ model: 'stories260K', prompt: 'Lily '.repeat(600), max_tokens: 5 }),
    (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.code, 'context_length_exceeded');
      return true;
    });
  const wrongKey = new OpenAI({ baseURL: client.baseURL, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(wrongKey.completions.create({ model: 'stories260K', prompt: PROMPT }), (e) => {
    assert.equal(e.status, 401);
    assert.equal(e.constructor.name, 'AuthenticationError');
    return true;
  });
});
