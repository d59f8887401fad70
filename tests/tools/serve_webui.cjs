// serve_webui.cjs DEVTOOLS_WS_URL PAGE_URL - drives lamina's chat page in a
// headless Chromium over the DevTools protocol (node 20's WebSocket, run with
// --experimental-websocket): opens the page, types a message into the text
// box, presses Enter, and waits until the streamed reply is complete and not
// empty. Prints the reply; exit status 1 on failure or after 60 s.
'use strict';
const [browserWs, pageUrl] = [process.argv[2], process.argv[3]];
let id = 0;
const pending = new Map();

function connect(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.onopen = () => resolve(ws);
    ws.onerror = (e) => reject(new Error('websocket: ' + (e.message || 'error')));
    ws.onmessage = (m) => {
      const msg = JSON.parse(m.data);
      if (msg.id && pending.has(msg.id)) {
        const { res, rej } = pending.get(msg.id);
        pending.delete(msg.id);
        msg.error ? rej(new Error(JSON.stringify(msg.error))) : res(msg.result);
      }
    };
  });
}

function send(ws, method, params = {}, sessionId) {
  const mid = ++id;
  const msg = { id: mid, method, params };
  if (sessionId) msg.sessionId = sessionId;
  ws.send(JSON.stringify(msg));
  return new Promise((res, rej) => pending.set(mid, { res, rej }));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const ws = await connect(browserWs);
  const { targetId } = await send(ws, 'Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send(ws, 'Target.attachToTarget', { targetId, flatten: true });
  const call = (m, p) => send(ws, m, p, sessionId);
  const evaluate = async (expr) => (await call('Runtime.evaluate', { expression: expr, returnByValue: true })).result.value;
  await call('Page.enable');
  await call('Runtime.enable');
  await call('Page.navigate', { url: pageUrl });
  for (let i = 0; i < 100 && !(await evaluate("document.readyState === 'complete' && !!document.getElementById('q')")); i++)
    await sleep(100);
  await evaluate("document.getElementById('q').focus()");
  await call('Input.insertText', { text: 'Hello, tell me a story.' });
  for (const type of ['keyDown', 'keyUp'])
    await call('Input.dispatchKeyEvent', { type, key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13, text: type === 'keyDown' ? '\r' : undefined });
  const deadline = Date.now() + 60000;
  let state;
  while (Date.now() < deadline) {
    state = await evaluate(`(() => { const r = document.getElementById('reply');
      return { done: !!document.getElementById('reply-done'), text: r ? r.textContent : null, cls: r ? r.className : null,
               user: [...document.querySelectorAll('.msg.user')].map(e => e.textContent) }; })()`);
    if (state.done) break;
    await sleep(100);
  }
  ws.close();
  const ok = state && state.done && state.text && state.cls === 'msg assistant' && state.user[0] === 'Hello, tell me a story.';
  console.log('web page reply: ' + JSON.stringify(state));
  return ok;
}

main().then((ok) => process.exit(ok ? 0 : 1), (e) => { console.error('FAIL: ' + e); process.exit(1); });
