// `kvserve serve` driven by the official OpenAI Node client: completions, chat, streaming, errors, logprobs,
// penalties, JSON mode and structured outputs (also under mpirun with the model split over two ranks).
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
// Ajv (JSON Schema 2020-12) validates structured outputs: a validator independent of the server's.
const { default: Ajv2020 } = await import('ajv/dist/2020.js');

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

// Completions with echo and logprobs over the token-id prompt [0 .. n-1]: each id's token string (the first has no
// logprob). The client knows no token ids; logit_bias needs them.
async function tokenStrings(n) {
  const ids = Array.from({ length: n }, (_, i) => i);
  const r = await client.completions.create({
    model: 'stories260K', prompt: ids, max_tokens: 1, temperature: 0, echo: true, logprobs: 0,
  });
  return r.choices[0].logprobs.tokens.slice(0, n);
}

function assertEntryShape(entry, top) {
  assert.equal(typeof entry.token, 'string');
  assert.ok(entry.logprob <= 0, `logprob ${entry.logprob}`);
  assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
  assert.equal(entry.top_logprobs.length, top);
  for (let k = 1; k < top; ++k) assert.ok(entry.top_logprobs[k - 1].logprob >= entry.top_logprobs[k].logprob);
}

test('chat logprobs: OpenAI shapes, greedy draws the most likely, streamed entries equal the whole', async () => {
  const request = {
    model: 'stories260K', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 12, temperature: 0,
    logprobs: true, top_logprobs: 3,
  };
  const r = await client.chat.completions.create(request);
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  let mass = 0;
  for (const entry of content) {
    assertEntryShape(entry, 3);
    assert.equal(entry.top_logprobs[0].token, entry.token, 'greedy takes the most likely token');
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
    mass = Math.max(mass, entry.top_logprobs.reduce((s, t) => s + Math.exp(t.logprob), 0));
  }
  assert.ok(mass <= 1 + 1e-5, `top_logprobs hold ${mass} of the probability`);
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);

  const stream = await client.chat.completions.create({ ...request, stream: true });
  const streamed = [];
  for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  assert.deepEqual(streamed, content);
  const plain = await client.chat.completions.create({ ...request, logprobs: false, top_logprobs: undefined });
  assert.equal(plain.choices[0].logprobs, null);
});

test('completions: echo with logprobs scores a prompt as the generation scored the same tokens', async () => {
  const generated = await client.completions.create({
    model: 'stories260K', prompt: PROMPT, max_tokens: 10, temperature: 0, logprobs: 2,
  });
  const g = generated.choices[0].logprobs;
  assert.equal(g.tokens.length, 10);
  assert.deepEqual(g.text_offset[0], PROMPT.length);
  for (const top of g.top_logprobs) assert.equal(Object.keys(top).length, 2);
  // The prompt followed by what was generated, scored in one prefill (how evaluation harnesses score text).
  const text = PROMPT + generated.choices[0].text;
  const scored = await client.completions.create({
    model: 'stories260K', prompt: text, max_tokens: 1, temperature: 0, logprobs: 2, echo: true,
  });
  const s = scored.choices[0].logprobs;
  assert.ok(scored.choices[0].text.startsWith(text));
  assert.equal(s.token_logprobs[0], null, 'the first token has no logprob');
  assert.equal(s.top_logprobs[0], null);
  assert.equal(s.tokens.join(''), scored.choices[0].text);
  for (let i = 0; i < s.tokens.length; ++i) {
    assert.equal(s.text_offset[i], s.tokens.slice(0, i).join('').length, `text_offset of token ${i}`);
  }
  const promptTokens = s.tokens.length - 1 - g.tokens.length;  // the prompt's own, then the generated, then 1 more
  assert.deepEqual(s.tokens.slice(promptTokens, promptTokens + g.tokens.length), g.tokens);
  for (let i = 0; i < g.tokens.length; ++i) {
    const a = g.token_logprobs[i];
    const b = s.token_logprobs[promptTokens + i];
    assert.ok(Math.abs(a - b) < 1e-4, `token ${i} '${g.tokens[i]}': generated ${a}, scored in the prompt ${b}`);
  }
  // The text's first piece is written without the dummy-prefix space, and so are its alternatives.
  assert.ok(!s.tokens[1].startsWith(' '));
  assert.ok(Object.keys(s.top_logprobs[1]).every((k) => !k.startsWith(' ')), JSON.stringify(s.top_logprobs[1]));
  // Streamed: the first chunk holds the echo and its tokens' logprobs (as OpenAI's); the chunks add up to the whole.
  const chunks = [];
  for await (const chunk of await client.completions.create({
    model: 'stories260K', prompt: text, max_tokens: 1, temperature: 0, logprobs: 2, echo: true, stream: true,
  })) chunks.push(chunk.choices[0]);
  assert.equal(chunks[0].text, text);
  assert.equal(chunks[0].logprobs.tokens.join(''), text);
  assert.deepEqual(chunks.flatMap((c) => c.logprobs?.tokens ?? []), s.tokens);
  assert.equal(chunks.map((c) => c.text).join(''), scored.choices[0].text);
  // A one-token prompt has no scored token, but its echo still comes, with the token listed.
  const one = [];
  for await (const chunk of await client.completions.create({
    model: 'stories260K', prompt: [300], max_tokens: 1, temperature: 0, logprobs: 1, echo: true, stream: true,
  })) one.push(chunk.choices[0]);
  assert.equal(one[0].logprobs.tokens.length, 1);
  assert.equal(one[0].logprobs.token_logprobs[0], null);
  assert.equal(one[0].text, one[0].logprobs.tokens[0]);
});

test('frequency and presence penalties change the greedy choice as OpenAI\'s formula says', async () => {
  const frequency = 0.6;
  const presence = 0.4;
  const r = await client.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 40, temperature: 0,
    logprobs: true, top_logprobs: 20, frequency_penalty: frequency, presence_penalty: presence,
  });
  const counts = new Map();  // generated so far, by token string
  let changed = 0;
  for (const entry of r.choices[0].logprobs.content) {
    // logprobs are the model's (before penalties): the drawn token must be the best after them.
    const adjusted = entry.top_logprobs.map((t) => {
      const c = counts.get(t.token) ?? 0;
      return { token: t.token, value: t.logprob - c * frequency - (c > 0 ? presence : 0) };
    });
    const best = adjusted.reduce((a, b) => (b.value > a.value ? b : a));
    assert.equal(entry.token, best.token, `drew '${entry.token}', the penalties favour '${best.token}'`);
    if (entry.token !== entry.top_logprobs[0].token) ++changed;
    counts.set(entry.token, (counts.get(entry.token) ?? 0) + 1);
  }
  assert.ok(changed > 0, 'the penalties changed no choice: the test proves nothing');
});

test('logit_bias: -100 bans the greedy token, +100 forces one', async () => {
  const strings = await tokenStrings(512);
  const request = { model: 'stories260K', prompt: PROMPT, max_tokens: 1, temperature: 0, logprobs: 2 };
  const first = (await client.completions.create(request)).choices[0].logprobs;
  // A JSON object's keys have no order: the two most likely by their logprobs.
  const [best, second] = Object.entries(first.top_logprobs[0]).sort((a, b) => b[1] - a[1]).map((e) => e[0]);
  assert.equal(first.tokens[0], best);
  // The vocabulary's byte tokens come first and some render as a piece does (',' is both): the piece is the last.
  const banned = await client.completions.create({ ...request, logit_bias: { [strings.lastIndexOf(best)]: -100 } });
  assert.equal(banned.choices[0].logprobs.tokens[0], second);
  const forcedId = strings.lastIndexOf(' dragon') >= 0 ? strings.lastIndexOf(' dragon') : 300;
  const forced = await client.completions.create({ ...request, logit_bias: { [forcedId]: 100 } });
  assert.equal(forced.choices[0].logprobs.tokens[0], strings[forcedId]);
});

test('response_format json_object: every output parses to an object, over seeds and budgets, whole and streamed', async () => {
  for (let seed = 1; seed <= 12; ++seed) {
    const maxTokens = [3, 10, 40, 200][seed % 4];
    const request = {
      model: 'stories260K', messages: [{ role: 'user', content: 'Describe a cat as JSON' }], max_tokens: maxTokens,
      temperature: 1.0, seed, response_format: { type: 'json_object' },
    };
    const r = await client.chat.completions.create(request);
    const text = r.choices[0].message.content;
    const doc = JSON.parse(text);
    assert.equal(typeof doc, 'object', text);
    assert.ok(!Array.isArray(doc) && doc !== null, text);
    assert.equal(r.choices[0].finish_reason, 'stop', text);
    assert.ok(r.usage.completion_tokens <= maxTokens);
    if (seed % 4 === 0) {
      let streamed = '';
      for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
        streamed += chunk.choices[0]?.delta?.content ?? '';
      }
      assert.equal(streamed, text);
    }
  }
});

// Each supported schema feature: required and optional properties, nested objects, arrays with item counts, enums,
// consts, strings with lengths, numbers, integers, booleans, null, anyOf, $ref/$defs with recursion.
const PERSON_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 2, maxLength: 16 },
    age: { type: 'integer' },
    height: { type: 'number' },
    pets: { type: 'array', items: { enum: ['cat', 'dog', 'fish'] }, minItems: 1, maxItems: 3 },
    home: { anyOf: [{ $ref: '#/$defs/place' }, { type: 'null' }] },
    friends: { type: 'array', items: { $ref: '#/$defs/friend' }, maxItems: 2 },
    mood: { const: 'happy' },
    vegan: { type: 'boolean' },
  },
  required: ['name', 'age', 'pets', 'home', 'friends', 'vegan'],
  additionalProperties: false,
  $defs: {
    place: { type: 'object', properties: { city: { type: 'string' }, floor: { type: ['integer', 'null'] } },
             required: ['city'], additionalProperties: false },
    friend: { type: 'object', properties: { name: { type: 'string', maxLength: 8 },
                                            friends: { type: 'array', items: { $ref: '#/$defs/friend' }, maxItems: 1 } },
              required: ['name'], additionalProperties: false },
  },
};

test('response_format json_schema: every output is an instance (Ajv), over seeds and budgets, whole and streamed', async () => {
  const validate = new Ajv2020({ strict: false }).compile(PERSON_SCHEMA);
  const keys = Object.keys(PERSON_SCHEMA.properties);
  for (let seed = 1; seed <= 10; ++seed) {
    const maxTokens = [80, 150, 300][seed % 3];
    const request = {
      model: 'stories260K', messages: [{ role: 'user', content: 'Describe a person as JSON' }], max_tokens: maxTokens,
      temperature: 1.0, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: PERSON_SCHEMA } },
    };
    const r = await client.chat.completions.create(request);
    const text = r.choices[0].message.content;
    const doc = JSON.parse(text);
    assert.ok(validate(doc), `${text}: ${JSON.stringify(validate.errors)}`);
    assert.equal(r.choices[0].finish_reason, 'stop', text);
    assert.ok(r.usage.completion_tokens <= maxTokens);
    // Properties come in the schema's order.
    const written = Object.keys(doc);
    assert.deepEqual(written, keys.filter((k) => written.includes(k)), text);
    if (seed % 5 === 0) {
      let streamed = '';
      for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
        streamed += chunk.choices[0]?.delta?.content ?? '';
      }
      assert.equal(streamed, text);
    }
  }
});

test('response_format json_schema: unsupported keywords and too small budgets are 400s that say why', async () => {
  const ask = (schema, maxTokens = 100) => client.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: 'x' }], max_tokens: maxTokens,
    response_format: { type: 'json_schema', json_schema: { name: 's', schema } },
  });
  await assert.rejects(ask({ type: 'object', properties: { d: { type: 'string', format: 'date' } } }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'response_format.json_schema.schema');
    assert.match(e.message, /#\/properties\/d': 'format' is not supported/);
    return true;
  });
  await assert.rejects(ask(PERSON_SCHEMA, 5), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'max_tokens');
    assert.match(e.message, /shortest instance takes \d+ bytes/);
    return true;
  });
});

const ADD_TOOL = {
  type: 'function',
  function: {
    name: 'add',
    description: 'Add two integers',
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'],
                  additionalProperties: false },
  },
};

test('tools: a required call comes back as tool_calls valid for the function, whole and streamed, and the round trip runs', async () => {
  const validate = new Ajv2020({ strict: false }).compile(ADD_TOOL.function.parameters);
  const messages = [{ role: 'user', content: 'What is 2 + 3?' }];
  const request = { model: 'stories260K', messages, tools: [ADD_TOOL], tool_choice: 'required', max_tokens: 60, seed: 5 };
  const r = await client.chat.completions.create(request);
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.ok(choice.message.tool_calls.length >= 1);
  for (const call of choice.message.tool_calls) {
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'add');
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    const args = JSON.parse(call.function.arguments);
    assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
  }
  // Streamed: the deltas the client assembles name the same calls (ids are new).
  const calls = [];
  let finish = null;
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const d of c.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: '', name: '', arguments: '' };
      calls[d.index].id += d.id ?? '';
      calls[d.index].name += d.function?.name ?? '';
      calls[d.index].arguments += d.function?.arguments ?? '';
    }
    finish = c.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.deepEqual(calls.map((c) => [c.name, c.arguments]),
    choice.message.tool_calls.map((c) => [c.function.name, c.function.arguments]));
  // A named choice: the function's arguments.
  const named = await client.chat.completions.create({
    ...request, tool_choice: { type: 'function', function: { name: 'add' } }, seed: 9,
  });
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'add');
  assert.ok(validate(JSON.parse(named.choices[0].message.tool_calls[0].function.arguments)));
  // The round trip: the call and its result go back; the model answers (tool_choice none: text).
  const call = choice.message.tool_calls[0];
  const answer = await client.chat.completions.create({
    model: 'stories260K', max_tokens: 8, seed: 1, tools: [ADD_TOOL], tool_choice: 'none',
    messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '5' }],
  });
  assert.equal(typeof answer.choices[0].message.content, 'string');
  assert.equal(answer.choices[0].message.tool_calls, undefined);
  // Errors name the field.
  await assert.rejects(client.chat.completions.create({ ...request, tool_choice: { type: 'function', function: { name: 'mul' } } }),
    (e) => e.status === 400 && e.param === 'tool_choice.function.name');
});
