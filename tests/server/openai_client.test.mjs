// `ditto serve` end to end through the official `openai` npm client (third_party/npm), run by
// node's test runner: `DITTO_TEST_MODEL=build/test_models/qwen3-0.6b-2l-sharded node --test
// tests/server/openai_client.test.mjs` (DITTO_BIN: the ditto binary, default build/tools/ditto).
//
// One server answers most tests; the --api-key, body-limit and queue-full tests start their own.
// The model is a 2-layer Qwen3-0.6B with random weights: its text is noise, so the checks are on
// the contract — exact token counts, finish reasons, the same bits for the same request (seeded or
// greedy, streamed or not, alone or among others), response shapes, and error statuses.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, withServerLog } from './server_process.mjs';


// The text a list of sampled tokens makes: special tokens such as '<|im_end|>' (sampled with
// ignore_eos) keep their text in logprobs but are skipped in the output (skip_special_tokens, as vLLM).
function textOf(tokens) {
  return tokens.filter((t) => !/^<\|[^|]*\|>$/.test(t)).join('');
}

const openaiEntry = new URL('../../third_party/npm/node_modules/openai/index.mjs', import.meta.url);
let openai;
try {
  openai = await import(openaiEntry.href);
} catch (err) {
  throw new Error(`cannot load the openai client from ${openaiEntry.pathname} (run scripts/install-deps.sh): ${err.message}`);
}
const { default: OpenAI, APIError, APIUserAbortError, AuthenticationError, BadRequestError, NotFoundError, InternalServerError } = openai;

const PROMPT = 'The future of AI is';
const MESSAGES = [{ role: 'user', content: 'Hello! Who are you?' }];
const CONTEXT = 40960;  // the model's max_position_embeddings
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', description: 'The city' } },
        required: ['city'],
      },
    },
  },
];

function makeClient(server, apiKey = 'unused') {
  // No retries: a 503 must reach the test, not be retried away.
  return new OpenAI({ baseURL: server.baseURL, apiKey, maxRetries: 0, timeout: 300_000 });
}

async function postJson(server, path, body, headers = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

async function tokenize(server, body) {
  const r = await postJson(server, '/tokenize', body);
  assert.equal(r.status, 200, `POST /tokenize ${JSON.stringify(body)} -> ${r.status} ${r.text}`);
  assert.equal(r.json.count, r.json.tokens.length);
  return r.json;
}

async function getMetrics(server) {
  const res = await fetch(`${server.url}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

// The value of the first sample of `name` whose labels contain every `labels` substring.
function metricValue(text, name, labels = []) {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = line.match(/^([^\s{]+)(\{[^}]*\})?\s+(\S+)$/);
    if (!m || m[1] !== name) continue;
    if (labels.every((l) => (m[2] ?? '').includes(l))) return Number(m[3]);
  }
  return undefined;
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

// Streamed completion chunks, joined per choice index: { text, finish_reason, stop_reason, logprobs }.
function joinCompletionChunks(chunks) {
  const byIndex = new Map();
  for (const chunk of chunks) {
    for (const c of chunk.choices) {
      if (!byIndex.has(c.index)) {
        byIndex.set(c.index, { text: '', finish_reason: null, stop_reason: null,
                               tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] });
      }
      const j = byIndex.get(c.index);
      j.text += c.text;
      if (c.finish_reason) {
        assert.equal(j.finish_reason, null, `choice ${c.index} finished twice`);
        j.finish_reason = c.finish_reason;
        j.stop_reason = c.stop_reason;
      }
      if (c.logprobs) {
        j.tokens.push(...c.logprobs.tokens);
        j.token_logprobs.push(...c.logprobs.token_logprobs);
        j.top_logprobs.push(...c.logprobs.top_logprobs);
        j.text_offset.push(...c.logprobs.text_offset);
      }
    }
  }
  return byIndex;
}

function joinChatChunks(chunks) {
  const byIndex = new Map();
  for (const chunk of chunks) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      if (!byIndex.has(c.index)) {
        assert.equal(c.delta.role, 'assistant', 'the first delta of a choice names the role');
        byIndex.set(c.index, { content: '', finish_reason: null, logprobs: [] });
      }
      const j = byIndex.get(c.index);
      if (typeof c.delta.content === 'string') j.content += c.delta.content;
      if (c.logprobs?.content) j.logprobs.push(...c.logprobs.content);
      if (c.finish_reason) {
        assert.equal(j.finish_reason, null, `choice ${c.index} finished twice`);
        j.finish_reason = c.finish_reason;
      }
    }
  }
  return byIndex;
}

async function expectApiError(promise, { status, errorClass, param, messageIncludes, code, type }) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected HTTP ${status}, but the request succeeded`);
  assert.ok(err instanceof APIError, `expected an APIError, got ${err?.constructor?.name}: ${err?.message}`);
  if (errorClass) assert.ok(err instanceof errorClass, `expected ${errorClass.name}, got ${err.constructor.name}: ${err.message}`);
  assert.equal(err.status, status, err.message);
  assert.equal(typeof err.error?.message, 'string', `the error body has a message: ${JSON.stringify(err.error)}`);
  if (type !== undefined) assert.equal(err.error.type, type);
  if (param !== undefined) assert.equal(err.param, param, `param of: ${err.message}`);
  if (code !== undefined) assert.equal(err.code, code);
  if (messageIncludes !== undefined) assert.ok(err.message.includes(messageIncludes), `"${messageIncludes}" in: ${err.message}`);
  return err;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------

describe('ditto serve through the openai client', () => {
  let server;
  let client;
  const logged = (fn) => withServerLog(() => server, fn);

  before(async () => {
    server = await startServer({ name: 'ditto-test' });
    client = makeClient(server);
  });

  after(async () => {
    if (!server) return;
    const stopped = await server.stop();
    assert.deepEqual({ code: stopped.code, killed: stopped.killed }, { code: 0, killed: false },
                     `ditto serve should exit 0 on SIGTERM\n${server.stderrTail()}`);
  });

  test('GET /health, /version and /v1/models', logged(async () => {
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    const version = await fetch(`${server.url}/version`);
    assert.equal(version.status, 200);
    const v = await version.json();
    assert.equal(typeof v.version, 'string');
    assert.match(v.version, /^\d+\.\d+\.\d+/);

    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['ditto-test']);
    assert.equal(models.data[0].object, 'model');
    assert.equal(models.data[0].max_model_len, CONTEXT);
  }));

  // --- completions ------------------------------------------------------------------------------

  let greedy;  // the greedy non-streamed response for PROMPT, 8 tokens
  test('completions: text, usage and finish_reason "length"', logged(async () => {
    const { count } = await tokenize(server, { prompt: PROMPT });
    const r = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true });
    assert.equal(r.object, 'text_completion');
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.model, 'ditto-test');
    assert.equal(typeof r.created, 'number');
    assert.equal(r.choices.length, 1);
    const [c] = r.choices;
    assert.equal(c.index, 0);
    assert.equal(typeof c.text, 'string');
    assert.ok(c.text.length > 0);
    assert.equal(c.finish_reason, 'length');
    assert.equal(c.logprobs, null);
    assert.deepEqual(r.usage, { prompt_tokens: count, completion_tokens: 8, total_tokens: count + 8 });
    greedy = r;
    // Greedy is a function of the request: the same text again.
    const again = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true });
    assert.equal(again.choices[0].text, c.text);
    assert.notEqual(again.id, r.id);
  }));

  test('completions: max_tokens defaults to 16', logged(async () => {
    const r = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, temperature: 0, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 16);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.ok(r.choices[0].text.startsWith(greedy.choices[0].text));
  }));

  test('completions: streaming gives the same text, then [DONE]', logged(async () => {
    const stream = await client.completions.create({
      model: 'ditto-test', prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true, stream: true });
    const chunks = await collect(stream);
    assert.ok(chunks.length >= 2, `several chunks, got ${chunks.length}`);
    const ids = new Set(chunks.map((ch) => ch.id));
    assert.equal(ids.size, 1, 'every chunk has the same id');
    for (const ch of chunks) {
      assert.equal(ch.object, 'text_completion');
      assert.equal(ch.model, 'ditto-test');
      assert.equal(ch.usage, undefined, 'no usage field without stream_options.include_usage');
    }
    const joined = joinCompletionChunks(chunks);
    assert.deepEqual([...joined.keys()], [0]);
    assert.equal(joined.get(0).text, greedy.choices[0].text);
    assert.equal(joined.get(0).finish_reason, 'length');
    // Only the last chunk carries the finish reason.
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
    for (const ch of chunks.slice(0, -1)) assert.equal(ch.choices[0].finish_reason, null);
  }));

  test('completions: seeded sampling is reproducible; streamed equals non-streamed', logged(async () => {
    const req = { model: 'ditto-test', prompt: PROMPT, max_tokens: 12, temperature: 1, seed: 1234, ignore_eos: true };
    const a = await client.completions.create(req);
    const b = await client.completions.create(req);
    assert.equal(a.choices[0].text, b.choices[0].text);
    const streamed = joinCompletionChunks(await collect(await client.completions.create({ ...req, stream: true })));
    assert.equal(streamed.get(0).text, a.choices[0].text);
    const other = await client.completions.create({ ...req, seed: 1235 });
    assert.notEqual(other.choices[0].text, a.choices[0].text, 'another seed samples another text');
  }));

  test('completions: n > 1', logged(async () => {
    const req = { model: 'ditto-test', prompt: PROMPT, n: 4, max_tokens: 8, temperature: 1, seed: 7, ignore_eos: true };
    const a = await client.completions.create(req);
    assert.deepEqual(a.choices.map((c) => c.index).sort(), [0, 1, 2, 3]);
    const texts = [...a.choices].sort((x, y) => x.index - y.index).map((c) => c.text);
    assert.equal(new Set(texts).size, 4, `4 distinct samples: ${JSON.stringify(texts)}`);
    for (const c of a.choices) assert.equal(c.finish_reason, 'length');
    const { count } = await tokenize(server, { prompt: PROMPT });
    assert.deepEqual(a.usage, { prompt_tokens: count, completion_tokens: 32, total_tokens: count + 32 });

    const b = await client.completions.create(req);
    assert.deepEqual([...b.choices].sort((x, y) => x.index - y.index).map((c) => c.text), texts);

    const streamed = joinCompletionChunks(await collect(await client.completions.create({ ...req, stream: true })));
    assert.deepEqual([...streamed.keys()].sort(), [0, 1, 2, 3]);
    for (let i = 0; i < 4; ++i) {
      assert.equal(streamed.get(i).text, texts[i], `streamed choice ${i}`);
      assert.equal(streamed.get(i).finish_reason, 'length');
    }
  }));

  test('completions: logprobs', logged(async () => {
    const req = { model: 'ditto-test', prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 3, ignore_eos: true };
    const r = await client.completions.create(req);
    const [c] = r.choices;
    assert.equal(c.text, greedy.choices[0].text.slice(0, c.text.length), 'logprobs do not change the tokens');
    const lp = c.logprobs;
    assert.equal(lp.tokens.length, 6);
    assert.equal(lp.token_logprobs.length, 6);
    assert.equal(lp.top_logprobs.length, 6);
    assert.equal(lp.text_offset.length, 6);
    for (let i = 0; i < 6; ++i) {
      assert.equal(typeof lp.tokens[i], 'string');
      assert.equal(typeof lp.token_logprobs[i], 'number');
      assert.ok(lp.token_logprobs[i] <= 0);
      const top = lp.top_logprobs[i];
      const keys = Object.keys(top);
      assert.ok(keys.length >= 1 && keys.length <= 4, `top_logprobs[${i}] has 1..logprobs+1 keys: ${JSON.stringify(top)}`);
      for (const v of Object.values(top)) assert.ok(typeof v === 'number' && v <= 0);
      assert.ok(lp.tokens[i] in top, `the sampled token is listed in top_logprobs[${i}]`);
      // Greedy: the sampled token is the most likely one.
      assert.equal(Math.max(...Object.values(top)), lp.token_logprobs[i], `greedy token ${i} is the argmax`);
      if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
    }
    assert.equal(lp.text_offset[0], 0);
    if (!lp.tokens.some((t) => t.includes('\uFFFD'))) assert.equal(textOf(lp.tokens), c.text);

    const streamed = joinCompletionChunks(await collect(await client.completions.create({ ...req, stream: true }))).get(0);
    assert.equal(streamed.text, c.text);
    assert.deepEqual(streamed.tokens, lp.tokens);
    assert.deepEqual(streamed.token_logprobs, lp.token_logprobs);
    assert.deepEqual(streamed.top_logprobs, lp.top_logprobs);
    assert.deepEqual(streamed.text_offset, lp.text_offset);

    // logprobs 0: the sampled token's logprob, and top_logprobs holding just that token.
    const zero = (await client.completions.create({ ...req, logprobs: 0 })).choices[0].logprobs;
    assert.deepEqual(zero.tokens, lp.tokens);
    assert.deepEqual(zero.token_logprobs, lp.token_logprobs);
    for (let i = 0; i < 6; ++i) assert.deepEqual(zero.top_logprobs[i], { [lp.tokens[i]]: lp.token_logprobs[i] });
  }));

  test('completions: echo', logged(async () => {
    const { count } = await tokenize(server, { prompt: PROMPT });
    const plain = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true });
    const r = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true, echo: true });
    assert.ok(r.choices[0].text.startsWith(PROMPT));
    assert.equal(r.choices[0].text, PROMPT + plain.choices[0].text);
    assert.equal(r.usage.prompt_tokens, count);
    assert.equal(r.usage.completion_tokens, 4);

    const withLp = await client.completions.create({
      model: 'ditto-test', prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true, echo: true, logprobs: 1 });
    const lp = withLp.choices[0].logprobs;
    assert.equal(withLp.choices[0].text, r.choices[0].text);
    assert.equal(lp.tokens.length, count + 4);
    assert.equal(lp.token_logprobs.length, count + 4);
    assert.equal(lp.top_logprobs.length, count + 4);
    assert.equal(lp.token_logprobs[0], null, 'the first prompt token has no logprob');
    for (const v of lp.token_logprobs.slice(1)) assert.ok(typeof v === 'number' && v <= 0);
    assert.equal(lp.tokens.slice(0, count).join(''), PROMPT);

    const streamed = joinCompletionChunks(await collect(await client.completions.create({
      model: 'ditto-test', prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true, echo: true, logprobs: 1, stream: true })));
    assert.equal(streamed.get(0).text, withLp.choices[0].text);
    assert.deepEqual(streamed.get(0).tokens, lp.tokens);
    assert.deepEqual(streamed.get(0).token_logprobs, lp.token_logprobs);

    const streamedPlain = joinCompletionChunks(await collect(await client.completions.create({
      model: 'ditto-test', prompt: PROMPT, max_tokens: 4, temperature: 0, ignore_eos: true, echo: true, stream: true })));
    assert.equal(streamedPlain.get(0).text, r.choices[0].text);

    // Token ids are echoed as their text.
    const { tokens } = await tokenize(server, { prompt: PROMPT });
    const byIds = await client.completions.create({ model: 'ditto-test', prompt: tokens, max_tokens: 4, temperature: 0, ignore_eos: true, echo: true });
    assert.equal(byIds.choices[0].text, r.choices[0].text);
  }));

  test('completions: stop strings', logged(async () => {
    const base = { model: 'ditto-test', prompt: PROMPT, max_tokens: 24, temperature: 0, ignore_eos: true };
    const full = (await client.completions.create(base)).choices[0].text;
    // A printable 3-character substring whose first occurrence is after the first few characters.
    let stop;
    for (let p = 3; p + 3 <= full.length && !stop; ++p) {
      const s = full.slice(p, p + 3);
      if (/^[\x21-\x7e][\x20-\x7e]*$/.test(s) && full.indexOf(s) >= 3) stop = s;
    }
    assert.ok(stop, `no usable stop string in the greedy output ${JSON.stringify(full)}`);
    const prefix = full.slice(0, full.indexOf(stop));

    const r = await client.completions.create({ ...base, stop: [stop] });
    assert.equal(r.choices[0].text, prefix, `stop ${JSON.stringify(stop)} in ${JSON.stringify(full)}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].stop_reason, stop);
    assert.ok(r.usage.completion_tokens < 24);

    const withStop = await client.completions.create({ ...base, stop: [stop], include_stop_str_in_output: true });
    assert.equal(withStop.choices[0].text, prefix + stop);
    assert.ok(withStop.choices[0].text.endsWith(stop));
    assert.equal(withStop.choices[0].finish_reason, 'stop');

    const streamed = joinCompletionChunks(await collect(await client.completions.create({ ...base, stop: stop, stream: true }))).get(0);
    assert.equal(streamed.text, prefix);
    assert.equal(streamed.finish_reason, 'stop');
    assert.equal(streamed.stop_reason, stop);
  }));

  test('completions: stream_options.include_usage', logged(async () => {
    const req = { model: 'ditto-test', prompt: PROMPT, max_tokens: 5, temperature: 0, ignore_eos: true };
    const plain = await client.completions.create(req);
    const chunks = await collect(await client.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage, plain.usage);
    for (const ch of chunks.slice(0, -1)) {
      assert.equal(ch.usage, null, 'chunks before the last carry usage: null');
      assert.equal(ch.choices.length, 1);
    }
    assert.equal(joinCompletionChunks(chunks.slice(0, -1)).get(0).text, plain.choices[0].text);
  }));

  test('completions: a list of prompts, and token ids', logged(async () => {
    const prompts = [PROMPT, 'Deep learning models can'];
    const params = { model: 'ditto-test', n: 2, max_tokens: 5, temperature: 0.8, seed: 11, ignore_eos: true };
    const r = await client.completions.create({ ...params, prompt: prompts });
    assert.equal(r.choices.length, 4);
    const choices = [...r.choices].sort((x, y) => x.index - y.index);
    assert.deepEqual(choices.map((c) => c.index), [0, 1, 2, 3]);
    const counts = [];
    for (let p = 0; p < prompts.length; ++p) {
      counts.push((await tokenize(server, { prompt: prompts[p] })).count);
      // Each prompt's choices are what the prompt gets alone (index = prompt * n + choice).
      const alone = await client.completions.create({ ...params, prompt: prompts[p] });
      const aloneTexts = [...alone.choices].sort((x, y) => x.index - y.index).map((c) => c.text);
      assert.deepEqual(choices.slice(2 * p, 2 * p + 2).map((c) => c.text), aloneTexts, `prompt ${p}`);
    }
    assert.deepEqual(r.usage, {
      prompt_tokens: counts[0] + counts[1], completion_tokens: 20, total_tokens: counts[0] + counts[1] + 20 });

    // Token ids: the same tokens as the text, so the same output.
    const { tokens } = await tokenize(server, { prompt: PROMPT });
    const byIds = await client.completions.create({ model: 'ditto-test', prompt: tokens, max_tokens: 8, temperature: 0, ignore_eos: true });
    assert.equal(byIds.choices[0].text, greedy.choices[0].text);
    assert.equal(byIds.usage.prompt_tokens, tokens.length);
    const { tokens: tokens2 } = await tokenize(server, { prompt: prompts[1] });
    const byIdLists = await client.completions.create({ ...params, prompt: [tokens, tokens2] });
    assert.deepEqual([...byIdLists.choices].sort((x, y) => x.index - y.index).map((c) => c.text), choices.map((c) => c.text));
  }));

  test('completions: the seed example answers the same text three times', logged(async () => {
    const texts = [];
    for (let i = 0; i < 3; ++i) {
      const r = await client.completions.create({ model: 'ditto-test', prompt: 'The future of AI is', max_tokens: 100, temperature: 0.7, seed: 42 });
      assert.ok(r.choices[0].text.length > 0);
      assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 100);
      texts.push(r.choices[0].text);
    }
    assert.equal(texts[1], texts[0]);
    assert.equal(texts[2], texts[0]);
  }));

  test('completions: concurrent requests get the same bits as alone', logged(async () => {
    const reqs = [0, 1, 2, 3].map((i) => ({
      model: 'ditto-test', prompt: `${PROMPT} ${'again '.repeat(i)}`, max_tokens: 10, temperature: 0.9, seed: 100 + i,
      ignore_eos: true, logprobs: 2 }));
    const alone = [];
    for (const req of reqs) alone.push(await client.completions.create(req));
    const together = await Promise.all(reqs.map((req) => client.completions.create(req)));
    for (let i = 0; i < reqs.length; ++i) {
      assert.equal(together[i].choices[0].text, alone[i].choices[0].text, `request ${i}`);
      assert.deepEqual(together[i].choices[0].logprobs, alone[i].choices[0].logprobs, `request ${i} logprobs`);
    }
  }));

  // --- chat completions -------------------------------------------------------------------------

  test('chat: message, usage, streaming', logged(async () => {
    const { count } = await tokenize(server, { messages: MESSAGES });
    const req = { model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 8, temperature: 0.7, seed: 5, ignore_eos: true };
    const r = await client.chat.completions.create(req);
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.model, 'ditto-test');
    assert.equal(r.choices.length, 1);
    const [c] = r.choices;
    assert.equal(c.index, 0);
    assert.equal(c.message.role, 'assistant');
    assert.equal(typeof c.message.content, 'string');
    assert.ok(c.message.content.length > 0);
    assert.equal(c.finish_reason, 'length');
    assert.deepEqual(r.usage, { prompt_tokens: count, completion_tokens: 8, total_tokens: count + 8 });

    const chunks = await collect(await client.chat.completions.create({ ...req, stream: true }));
    assert.equal(new Set(chunks.map((ch) => ch.id)).size, 1);
    const joined = joinChatChunks(chunks).get(0);
    assert.equal(joined.content, c.message.content);
    assert.equal(joined.finish_reason, 'length');
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');

    const usageChunks = await collect(await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
    assert.deepEqual(usageChunks.at(-1).choices, []);
    assert.deepEqual(usageChunks.at(-1).usage, r.usage);
  }));

  test('chat: n > 1', logged(async () => {
    const req = { model: 'ditto-test', messages: MESSAGES, n: 3, max_completion_tokens: 6, temperature: 1, seed: 9, ignore_eos: true };
    const r = await client.chat.completions.create(req);
    const choices = [...r.choices].sort((x, y) => x.index - y.index);
    assert.deepEqual(choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(new Set(choices.map((c) => c.message.content)).size, 3);
    assert.equal(r.usage.completion_tokens, 18);
    const streamed = joinChatChunks(await collect(await client.chat.completions.create({ ...req, stream: true })));
    for (let i = 0; i < 3; ++i) assert.equal(streamed.get(i).content, choices[i].message.content, `choice ${i}`);
  }));

  test('chat: logprobs and top_logprobs', logged(async () => {
    const req = { model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 5, temperature: 0.7, seed: 3,
                  ignore_eos: true, logprobs: true, top_logprobs: 3 };
    const r = await client.chat.completions.create(req);
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    assert.equal(content.length, 5);
    for (const e of content) {
      assert.equal(typeof e.token, 'string');
      assert.ok(typeof e.logprob === 'number' && e.logprob <= 0);
      assert.ok(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255));
      if (!e.token.includes('\uFFFD')) assert.equal(Buffer.from(e.bytes).toString('utf8'), e.token);
      assert.equal(e.top_logprobs.length, 3);
      for (let k = 0; k < 3; ++k) {
        const t = e.top_logprobs[k];
        assert.equal(typeof t.token, 'string');
        assert.ok(typeof t.logprob === 'number' && t.logprob <= 0);
        assert.ok(Array.isArray(t.bytes));
        if (k > 0) assert.ok(t.logprob <= e.top_logprobs[k - 1].logprob, 'top_logprobs are sorted, most likely first');
      }
      assert.ok(e.logprob <= e.top_logprobs[0].logprob);
    }
    if (!content.some((e) => e.token.includes('\uFFFD'))) {
      assert.equal(textOf(content.map((e) => e.token)), r.choices[0].message.content);
    }

    const streamed = joinChatChunks(await collect(await client.chat.completions.create({ ...req, stream: true }))).get(0);
    assert.equal(streamed.content, r.choices[0].message.content);
    assert.deepEqual(streamed.logprobs, content);

    const without = await client.chat.completions.create({ ...req, logprobs: undefined, top_logprobs: undefined });
    assert.equal(without.choices[0].logprobs, null);
    assert.equal(without.choices[0].message.content, r.choices[0].message.content);
  }));

  test('chat: max_completion_tokens and max_tokens', logged(async () => {
    const r = await client.chat.completions.create({
      model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 3, temperature: 0, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 3);
    assert.equal(r.choices[0].finish_reason, 'length');
    const legacy = await client.chat.completions.create({
      model: 'ditto-test', messages: MESSAGES, max_tokens: 3, temperature: 0, ignore_eos: true });
    assert.equal(legacy.usage.completion_tokens, 3);
    assert.equal(legacy.choices[0].message.content, r.choices[0].message.content);
  }));

  test('chat: chat_template_kwargs enable_thinking', logged(async () => {
    const base = { model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 1, temperature: 0 };
    const dflt = await client.chat.completions.create(base);
    const noThink = await client.chat.completions.create({ ...base, chat_template_kwargs: { enable_thinking: false } });
    assert.notEqual(noThink.usage.prompt_tokens, dflt.usage.prompt_tokens);
    assert.equal(dflt.usage.prompt_tokens, (await tokenize(server, { messages: MESSAGES })).count);
    assert.equal(noThink.usage.prompt_tokens,
                 (await tokenize(server, { messages: MESSAGES, chat_template_kwargs: { enable_thinking: false } })).count);
  }));

  test('chat: tools are rendered into the prompt', logged(async () => {
    const base = { model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 1, temperature: 0 };
    const without = await client.chat.completions.create(base);
    // tool_choice "none" keeps the tools in the prompt, as vLLM's default does (issue 30).
    const withTools = await client.chat.completions.create({ ...base, tools: TOOLS, tool_choice: 'none' });
    assert.ok(withTools.usage.prompt_tokens > without.usage.prompt_tokens,
              `${withTools.usage.prompt_tokens} > ${without.usage.prompt_tokens}`);
    const tok = await tokenize(server, { messages: MESSAGES, tools: TOOLS });
    assert.equal(withTools.usage.prompt_tokens, tok.count);
    // Tools without tool_choice mean "auto", which (as vLLM's) needs --enable-auto-tool-choice.
    await expectApiError(client.chat.completions.create({ ...base, tools: TOOLS }),
                         { status: 400, param: 'tool_choice', messageIncludes: '--enable-auto-tool-choice' });
  }));

  // --- errors -----------------------------------------------------------------------------------

  test('400 for bad parameters names the parameter', logged(async () => {
    const c = (extra) => client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 2, ...extra });
    const chat = (extra) => client.chat.completions.create({ model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 2, ...extra });
    // vLLM's error body: type the error's name, code the HTTP status.
    const bad = { status: 400, errorClass: BadRequestError, type: 'BadRequestError', code: 400 };
    await expectApiError(c({ temperature: -1 }), { ...bad, param: 'temperature' });
    await expectApiError(c({ temperature: 'hot' }), { ...bad, param: 'temperature', messageIncludes: 'temperature' });
    await expectApiError(c({ top_p: 2 }), { ...bad, param: 'top_p' });
    await expectApiError(c({ n: 0 }), { ...bad, param: 'n' });
    await expectApiError(c({ n: 1000 }), { ...bad, param: 'n' });
    await expectApiError(c({ n: 'two' }), { ...bad, param: 'n' });
    await expectApiError(c({ max_tokens: 50000 }), { ...bad, param: 'max_tokens', messageIncludes: String(CONTEXT) });
    await expectApiError(c({ max_tokens: -1 }), { ...bad, param: 'max_tokens' });
    await expectApiError(c({ logprobs: 21 }), { ...bad, param: 'logprobs' });
    await expectApiError(c({ stop: 5 }), { ...bad, param: 'stop' });
    await expectApiError(c({ seed: 2 ** 63 }), { ...bad, param: 'seed' });
    await expectApiError(c({ stream_options: { include_usage: true } }), { ...bad, param: 'stream_options' });
    await expectApiError(client.completions.create({ model: 'ditto-test', max_tokens: 2 }), { ...bad, param: 'prompt' });
    await expectApiError(c({ prompt: [] }), { ...bad, param: 'prompt' });
    await expectApiError(c({ prompt: [1, 2, 99999999] }), { ...bad, param: 'prompt' });

    await expectApiError(chat({ temperature: -1 }), { ...bad, param: 'temperature' });
    await expectApiError(chat({ temperature: 'hot' }), { ...bad, param: 'temperature' });
    await expectApiError(chat({ max_completion_tokens: 50000 }), { ...bad, param: 'max_completion_tokens', messageIncludes: String(CONTEXT) });
    await expectApiError(chat({ top_logprobs: 3 }), { ...bad, param: 'top_logprobs' });
    await expectApiError(chat({ messages: 'hi' }), { ...bad, param: 'messages' });
    await expectApiError(chat({ messages: [{ role: '', content: 'hi' }] }), { ...bad, param: 'messages' });
    await expectApiError(chat({ tools: [{ type: 'function' }] }), { ...bad, param: 'tools' });
  }));

  test('a streaming request with a bad parameter gets an HTTP 400, not a stream', logged(async () => {
    const bad = { status: 400, errorClass: BadRequestError, param: 'temperature' };
    await expectApiError(client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 2, temperature: -1, stream: true }), bad);
    await expectApiError(client.chat.completions.create({ model: 'ditto-test', messages: MESSAGES, max_tokens: 2, temperature: -1, stream: true }), bad);
    await expectApiError(client.completions.create({ model: 'no-such-model', prompt: PROMPT, max_tokens: 2, stream: true }),
                         { status: 404, errorClass: NotFoundError, param: 'model' });
  }));

  test('400 for a zero max_completion_tokens names max_completion_tokens', logged(async () => {
    // The field the client sent, not the internal max_tokens it maps to.
    await expectApiError(client.chat.completions.create({ model: 'ditto-test', messages: MESSAGES, max_completion_tokens: 0 }),
                         { status: 400, errorClass: BadRequestError, param: 'max_completion_tokens' });
  }));

  test('400 for malformed JSON', logged(async () => {
    for (const path of ['/v1/completions', '/v1/chat/completions', '/tokenize']) {
      const r = await postJson(server, path, '{"model": "ditto-test", "prompt": "hi", "max_tokens": 3');
      assert.equal(r.status, 400, `${path}: ${r.text}`);
      assert.match(r.headers.get('content-type') ?? '', /application\/json/);
      assert.equal(r.json?.error?.type, 'BadRequestError', r.text);
      assert.equal(r.json?.error?.code, 400, r.text);
      assert.equal(typeof r.json.error.message, 'string');
    }
    const notObject = await postJson(server, '/v1/completions', '[1, 2]');
    assert.equal(notObject.status, 400);
    assert.equal(notObject.json?.error?.type, 'BadRequestError');
  }));

  test('404 for an unknown model or route', logged(async () => {
    const notFound = { status: 404, errorClass: NotFoundError, type: 'NotFoundError', param: 'model', code: 404,
                       messageIncludes: 'The model `no-such-model` does not exist.' };
    await expectApiError(client.completions.create({ model: 'no-such-model', prompt: PROMPT, max_tokens: 2 }), notFound);
    await expectApiError(client.chat.completions.create({ model: 'no-such-model', messages: MESSAGES, max_tokens: 2 }), notFound);
    const route = await postJson(server, '/v1/no-such-route', {});
    assert.equal(route.status, 404);
    assert.equal(route.json?.error?.type, 'Not Found', route.text);
    assert.equal(route.json?.error?.code, 404, route.text);
  }));

  test('413 for a 50 MB body; the server answers afterwards', logged(async () => {
    const body = JSON.stringify({ model: 'ditto-test', prompt: 'x'.repeat(50 * 1024 * 1024), max_tokens: 1 });
    const r = await postJson(server, '/v1/completions', body);
    assert.equal(r.status, 413, r.text.slice(0, 500));
    assert.equal(typeof r.json?.error?.message, 'string', r.text.slice(0, 500));
    const after = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true });
    assert.equal(after.choices[0].text, greedy.choices[0].text);
  }));

  // --- a client that goes away ------------------------------------------------------------------

  test('a client that disconnects mid-stream aborts its request', logged(async () => {
    const abortedBefore = metricValue(await getMetrics(server), 'ditto:request_success_total', ['finished_reason="abort"']) ?? 0;
    const stream = await client.completions.create({
      model: 'ditto-test', prompt: PROMPT, max_tokens: 2000, temperature: 0, ignore_eos: true, stream: true });
    let received = 0;
    for await (const chunk of stream) {
      assert.equal(chunk.choices[0].finish_reason, null);
      if (++received === 2) break;  // leaving the loop aborts the HTTP request
    }
    stream.controller.abort();
    let text = '';
    const deadline = Date.now() + 10_000;
    for (;;) {
      text = await getMetrics(server);
      const aborted = metricValue(text, 'ditto:request_success_total', ['finished_reason="abort"']);
      const running = metricValue(text, 'ditto:num_requests_running');
      if (aborted >= abortedBefore + 1 && running === 0) break;
      if (Date.now() > deadline) {
        assert.fail(`within 10 s of the disconnect: abort count ${aborted} (before ${abortedBefore}), running ${running}\n${text}`);
      }
      await sleep(100);
    }
    const r = await client.completions.create({ model: 'ditto-test', prompt: PROMPT, max_tokens: 8, temperature: 0, ignore_eos: true });
    assert.equal(r.choices[0].text, greedy.choices[0].text);
  }));

  test('GET /metrics', logged(async () => {
    const text = await getMetrics(server);
    assert.match(text, /^ditto:time_to_first_token_seconds_bucket\{[^}]*le="[^"]+"\} \d+$/m);
    assert.ok(metricValue(text, 'ditto:time_to_first_token_seconds_count') > 0);
    assert.equal(metricValue(text, 'ditto:num_requests_running'), 0);
    assert.ok(metricValue(text, 'ditto:prompt_tokens_total') > 0);
    assert.ok(metricValue(text, 'ditto:generation_tokens_total') > 0);
    assert.ok(metricValue(text, 'ditto:request_success_total', ['finished_reason="length"']) > 0);
    assert.ok(metricValue(text, 'ditto:request_success_total', ['finished_reason="stop"']) > 0);
    assert.ok(metricValue(text, 'ditto:http_requests_total', ['status="200"']) > 0);
    assert.ok(metricValue(text, 'ditto:http_requests_total', ['status="400"']) > 0);
    assert.ok(text.includes('model_name="ditto-test"'));
  }));
});

// ---------------------------------------------------------------------------------------------

describe('--api-key', () => {
  let server;
  const logged = (fn) => withServerLog(() => server, fn);
  before(async () => {
    server = await startServer({ name: 'keyed', args: ['--api-key', 'sk-right'] });
  });
  after(async () => {
    if (server) await server.stop();
  });

  test('401 without the key or with a wrong one; the right key works', logged(async () => {
    const right = makeClient(server, 'sk-right');
    const wrong = makeClient(server, 'sk-wrong');
    const unauthorized = { status: 401, errorClass: AuthenticationError, code: 401 };
    await expectApiError(wrong.models.list(), unauthorized);
    await expectApiError(wrong.completions.create({ model: 'keyed', prompt: PROMPT, max_tokens: 2 }), unauthorized);
    // No Authorization header at all.
    await expectApiError(right.completions.create({ model: 'keyed', prompt: PROMPT, max_tokens: 2 }, { headers: { Authorization: null } }),
                         unauthorized);
    const raw = await fetch(`${server.baseURL}/models`);
    assert.equal(raw.status, 401);
    assert.equal((await raw.json()).error.code, 401);

    const models = await right.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['keyed']);
    const r = await right.completions.create({ model: 'keyed', prompt: PROMPT, max_tokens: 3, ignore_eos: true });
    assert.equal(r.usage.completion_tokens, 3);
    // vLLM's rule: only the liveness probes need no key.
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
  }));
});

describe('--max-request-body-bytes', () => {
  let server;
  const logged = (fn) => withServerLog(() => server, fn);
  before(async () => {
    server = await startServer({ name: 'small-body', args: ['--max-request-body-bytes', '1MiB'] });
  });
  after(async () => {
    if (server) await server.stop();
  });

  test('413 for a 2 MB body; a body under the limit is read', logged(async () => {
    const big = JSON.stringify({ model: 'small-body', prompt: 'hello world '.repeat(175_000), max_tokens: 1 });
    assert.ok(big.length > 2_000_000);
    const r = await postJson(server, '/v1/completions', big);
    assert.equal(r.status, 413, r.text.slice(0, 500));
    assert.equal(r.json?.error?.type, 'Request Entity Too Large', r.text.slice(0, 500));
    assert.equal(typeof r.json.error.message, 'string');

    // 0.9 MB is accepted by the HTTP layer; the prompt is then too long for the context (400).
    const underLimit = JSON.stringify({ model: 'small-body', prompt: 'hello world '.repeat(75_000), max_tokens: 1 });
    assert.ok(underLimit.length < 1024 * 1024);
    const r2 = await postJson(server, '/v1/completions', underLimit);
    assert.equal(r2.status, 400, r2.text.slice(0, 500));
    assert.equal(r2.json?.error?.param, 'prompt');

    const client = makeClient(server);
    const ok = await client.completions.create({ model: 'small-body', prompt: PROMPT, max_tokens: 2, ignore_eos: true });
    assert.equal(ok.usage.completion_tokens, 2);
  }));

  test('413 for a chunked (Transfer-Encoding) body over the limit', logged(async () => {
    // No Content-Length: the limit must hold while the chunks are read, or a client can make the
    // server buffer any amount.
    const bytes = new TextEncoder().encode(JSON.stringify({ model: 'small-body', prompt: 'hello world '.repeat(175_000), max_tokens: 1 }));
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 65536) controller.enqueue(bytes.slice(i, i + 65536));
        controller.close();
      },
    });
    const res = await fetch(`${server.url}/v1/completions`, {
      method: 'POST', body, duplex: 'half', headers: { 'Content-Type': 'application/json' } });
    const text = await res.text();
    assert.equal(res.status, 413, text.slice(0, 500));
    assert.equal(JSON.parse(text).error?.type, 'Request Entity Too Large');
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
  }));
});

describe('a full queue', () => {
  let server;
  const logged = (fn) => withServerLog(() => server, fn);
  before(async () => {
    server = await startServer({ name: 'busy', args: ['--max-num-seqs', '1', '--max-queued-requests', '1'] });
  });
  after(async () => {
    if (server) await server.stop();
  });

  test('503 when the queue is full; every accepted request completes', logged(async (t) => {
    const client = makeClient(server);
    const req = { model: 'busy', prompt: PROMPT, max_tokens: 64, temperature: 0, ignore_eos: true };
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => client.completions.create(req)));
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    const refused = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
    for (const err of refused) {
      assert.ok(err instanceof InternalServerError, `${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 503, err.message);
      assert.equal(typeof err.error?.message, 'string');
    }
    t.diagnostic(`${ok.length} of 8 concurrent requests served, ${refused.length} refused with 503`);
    assert.ok(refused.length >= 1, 'at least one of 8 concurrent requests is refused');
    assert.ok(ok.length >= 1, 'at least one is served');
    for (const r of ok) {
      assert.equal(r.usage.completion_tokens, 64);
      assert.equal(r.choices[0].text, ok[0].choices[0].text);
    }
    // Once the queue drains, the server takes requests again.
    const after = await client.completions.create({ ...req, max_tokens: 2 });
    assert.equal(after.usage.completion_tokens, 2);
  }));
});

describe('a client that gives up on a non-streaming request', () => {
  let server;
  const logged = (fn) => withServerLog(() => server, fn);
  before(async () => {
    server = await startServer({ name: 'impatient' });
  });
  after(async () => {
    if (server) await server.stop(60_000);
  });

  test('its request is aborted', logged(async () => {
    const client = makeClient(server);
    const generated = async () => metricValue(await getMetrics(server), 'ditto:generation_tokens_total');
    const before = await generated();
    const controller = new AbortController();
    const pending = client.completions.create(
      { model: 'impatient', prompt: PROMPT, max_tokens: 1500, temperature: 0, ignore_eos: true }, { signal: controller.signal });
    pending.catch(() => {});
    // Wait until it is generating, then hang up.
    const started = Date.now() + 10_000;
    while ((await generated()) === before) {
      assert.ok(Date.now() < started, 'the request never started generating');
      await sleep(50);
    }
    controller.abort();
    await assert.rejects(pending, APIUserAbortError);
    let text = '';
    const deadline = Date.now() + 10_000;
    for (;;) {
      text = await getMetrics(server);
      const aborted = metricValue(text, 'ditto:request_success_total', ['finished_reason="abort"']);
      const running = metricValue(text, 'ditto:num_requests_running');
      if (aborted >= 1 && running === 0) break;
      if (Date.now() > deadline) {
        assert.fail(`10 s after the client hung up: abort count ${aborted}, running ${running}, ` +
                    `generated tokens ${metricValue(text, 'ditto:generation_tokens_total')} (the request still runs)`);
      }
      await sleep(100);
    }
  }));
});
