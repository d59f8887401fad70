// serve_openai.cjs NPM_PREFIX URL KEY - the official `openai` npm client (v4)
// against `lamina serve`: models, chat and completions (streaming and not;
// greedy streamed text == non-streamed text), embeddings (the client asks for
// base64 and decodes it), and an API error surfacing as the client's APIError.
'use strict';
const path = require('path');
const OpenAI = require(path.join(process.argv[2], 'node_modules', 'openai'));
const [url, key] = [process.argv[3], process.argv[4]];
const client = new OpenAI({ baseURL: url + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });
let pass = 0, fail = 0;
function check(cond, what) {
  if (cond) pass++;
  else { fail++; console.error('FAIL: ' + what); }
}

async function main() {
  const models = await client.models.list();
  const model = models.data[0].id;
  check(model === 'stories260K.gguf', 'models: ' + JSON.stringify(models.data));

  const messages = [{ role: 'user', content: 'Tell me a story about a dog.' }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
  const text = chat.choices[0].message.content;
  check(chat.object === 'chat.completion' && text.length > 0 && chat.usage.completion_tokens > 0, 'chat: ' + JSON.stringify(chat));
  let streamed = '', finish = null, role = null;
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true });
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.role) role = c.delta.role;
    streamed += c.delta.content || '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  check(streamed === text && role === 'assistant' && finish, `chat stream '${streamed}' vs '${text}' (${role}, ${finish})`);

  const cmpl = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  const ctext = cmpl.choices[0].text;
  check(ctext.length > 0 && cmpl.choices[0].finish_reason === 'length', 'completions: ' + JSON.stringify(cmpl));
  let cs = '';
  const cstream = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 20, temperature: 0, stream: true });
  for await (const chunk of cstream) cs += chunk.choices[0] ? chunk.choices[0].text : '';
  check(cs === ctext, `completions stream '${cs}' vs '${ctext}'`);

  const emb = await client.embeddings.create({ model, input: ['hello', 'world'] });
  const v = emb.data[0].embedding;
  const norm = v.reduce((a, x) => a + x * x, 0);
  check(emb.data.length === 2 && v.length > 0 && Math.abs(norm - 1) < 1e-3, 'embeddings: ' + JSON.stringify(emb).slice(0, 200));
  const embf = await client.embeddings.create({ model, input: 'hello', encoding_format: 'float' });
  check(embf.data[0].embedding.every((x, i) => Math.abs(x - v[i]) < 1e-6), 'float and base64 embeddings differ');

  try {
    await client.chat.completions.create({ model, messages: [], max_tokens: 4 });
    check(false, 'empty messages accepted');
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === 400 && e.error && e.error.message, 'error shape: ' + e);
  }
  const bad = new OpenAI({ baseURL: url + '/v1', apiKey: 'wrong', maxRetries: 0 });
  try {
    await bad.models.list();
    check(false, 'wrong key accepted');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, 'wrong key: ' + e);
  }
}

main().then(() => {
  console.log(`openai client: ${pass} passed, ${fail} failed`);
  process.exit(fail ? 1 : 0);
}, (e) => {
  console.error('FAIL: ' + (e && e.stack || e));
  process.exit(1);
});
