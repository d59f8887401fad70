#!/usr/bin/env python3
"""serve_check.py URL KEY - the checks of test_serve.sh that need more than curl.

Against a running `lamina serve` (stories260K, --api-key KEY, --max-body 65536,
--conn-timeout 2, at least 4 slots): OpenAI routes streaming and not, stop,
max_tokens, seed, n, logprobs, response_format, tokenize round trip, metrics,
auth, bad input (each gets its 4xx and the server keeps serving), a slow sender
that is cut off, and greedy parallel == serial. Prints one line per failure and
a summary; exit status 1 when anything failed. Standard library only.
"""
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

URL, KEY = sys.argv[1], sys.argv[2]
HOST, PORT = URL.split("//")[1].split(":")[0], int(URL.rsplit(":", 1)[1])
fails = []
passes = 0


def check(cond, what):
    global passes
    if cond:
        passes += 1
    else:
        fails.append(what)
        print("FAIL:", what, file=sys.stderr)


def call(path, body=None, key=KEY, raw=None, method=None):
    """(status, parsed JSON or text) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(URL + path, data, method=method or ("POST" if data is not None else "GET"))
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def sse(path, body):
    """The parsed data events of a streaming request (the text '[DONE]' kept as is)."""
    st, text = call(path, dict(body, stream=True))
    if st != 200 or not isinstance(text, str):
        return st, []
    events = []
    for ev in text.split("\n\n"):
        if ev.startswith("data: "):
            d = ev[6:]
            events.append(d if d == "[DONE]" else json.loads(d))
    return st, events


def is_error(st, j, code):
    return st == code and isinstance(j, dict) and isinstance(j.get("error"), dict) and \
        all(k in j["error"] for k in ("message", "type", "param", "code"))


PROMPT = "Once upon a time"
CHAT = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Tell me about a cat."}]


def basic():
    st, j = call("/v1/completions", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0})
    check(st == 200 and j["object"] == "text_completion" and j["choices"][0]["finish_reason"] == "length" and
          j["usage"]["completion_tokens"] == 24 and j["choices"][0]["text"], "completions: %s" % j)
    text = j["choices"][0]["text"] if st == 200 else ""
    st, ev = sse("/v1/completions", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0})
    streamed = "".join(e["choices"][0]["text"] for e in ev if isinstance(e, dict) and e["choices"])
    check(ev and ev[-1] == "[DONE]" and streamed == text, "completions stream %r != %r" % (streamed, text))
    check(any(isinstance(e, dict) and e["choices"] and e["choices"][0]["finish_reason"] == "length" for e in ev),
          "completions stream: no finish_reason")

    st, j = call("/v1/chat/completions", {"messages": CHAT, "max_tokens": 30, "temperature": 0})
    check(st == 200 and j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] == "assistant",
          "chat: %s" % j)
    ctext = j["choices"][0]["message"]["content"] if st == 200 else None
    st, ev = sse("/v1/chat/completions", {"messages": CHAT, "max_tokens": 30, "temperature": 0,
                                          "stream_options": {"include_usage": True}})
    chunks = [e for e in ev if isinstance(e, dict)]
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    check(streamed == ctext, "chat stream %r != %r" % (streamed, ctext))
    check(chunks and chunks[0]["object"] == "chat.completion.chunk" and
          chunks[0]["choices"][0]["delta"].get("role") == "assistant", "chat stream: no role in the first delta")
    check(len(chunks) >= 2 and chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length") and
          chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0 and ev[-1] == "[DONE]",
          "chat stream: end (finish_reason, usage, [DONE])")

    # stop strings, one of them across token boundaries; stop text not emitted
    cut = text.find("ittle gi")
    if cut > 0:
        st, j = call("/v1/completions", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0,
                                         "stop": ["zzz", "ittle gi"]})
        check(st == 200 and j["choices"][0]["text"] == text[:cut] and j["choices"][0]["finish_reason"] == "stop",
              "stop: %r" % j["choices"][0]["text"])
        st, ev = sse("/v1/completions", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0, "stop": "ittle gi"})
        streamed = "".join(e["choices"][0]["text"] for e in ev if isinstance(e, dict) and e["choices"])
        check(streamed == text[:cut], "stop (stream): %r" % streamed)
    else:
        check(False, "reference text has no 'ittle gi': %r" % text)
    st, j = call("/completion", {"prompt": PROMPT, "n_predict": 7, "temperature": 0})
    check(st == 200 and j["tokens_predicted"] == 7 and j["stop"] is True and j["content"] == text[:len(j["content"])],
          "/completion: %s" % j)


def sampling():
    b = {"prompt": PROMPT, "max_tokens": 20, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0}
    a1 = call("/v1/completions", dict(b, seed=42))[1]["choices"][0]["text"]
    a2 = call("/v1/completions", dict(b, seed=42))[1]["choices"][0]["text"]
    outs = {call("/v1/completions", dict(b, seed=s))[1]["choices"][0]["text"] for s in (1, 2, 3)}
    check(a1 == a2 and len(outs) > 1, "seed: %r %r %r" % (a1, a2, outs))
    st, j = call("/v1/completions", dict(b, seed=7, n=2))
    check(st == 200 and [c["index"] for c in j["choices"]] == [0, 1] and j["usage"]["completion_tokens"] == 40,
          "n=2: %s" % j)
    st, ev = sse("/v1/chat/completions", {"messages": CHAT, "max_tokens": 8, "n": 2, "seed": 1, "temperature": 1})
    idx = {c["choices"][0]["index"] for c in ev if isinstance(c, dict) and c["choices"]}
    check(idx == {0, 1}, "n=2 stream indices %s" % idx)
    st, j = call("/v1/chat/completions", {"messages": CHAT, "max_tokens": 6, "temperature": 0, "logprobs": True,
                                          "top_logprobs": 3})
    lp = j["choices"][0]["logprobs"]["content"] if st == 200 else []
    check(len(lp) == 6 and all(len(t["top_logprobs"]) == 3 and t["logprob"] <= 0 and
                               t["token"] == t["top_logprobs"][0]["token"] for t in lp), "chat logprobs: %s" % lp)
    # logprobs without top_logprobs (fuzz_http: the top-n loop read index -1)
    st, j = call("/v1/chat/completions", {"messages": CHAT, "max_tokens": 4, "temperature": 0, "logprobs": True})
    lp = j["choices"][0]["logprobs"]["content"] if st == 200 else []
    check(len(lp) == 4 and all(t["top_logprobs"] == [] and t["logprob"] <= 0 for t in lp),
          "chat logprobs without top_logprobs: %s" % lp)
    st, j = call("/v1/completions", {"prompt": PROMPT, "max_tokens": 5, "temperature": 0, "logprobs": 2})
    lp = j["choices"][0]["logprobs"] if st == 200 else {}
    check(len(lp.get("tokens", [])) == 5 and len(lp["top_logprobs"][0]) == 2 and
          "".join(lp["tokens"]) == j["choices"][0]["text"], "completions logprobs: %s" % lp)


def formats():
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                "age": {"type": "integer", "minimum": 0}},
              "required": ["name", "age"], "additionalProperties": False}
    st, j = call("/v1/chat/completions", {"messages": CHAT, "max_tokens": 200, "temperature": 0,
                                          "response_format": {"type": "json_schema",
                                                              "json_schema": {"name": "p", "schema": schema}}})
    try:
        obj = json.loads(j["choices"][0]["message"]["content"])
        ok = isinstance(obj, dict) and set(obj) == {"name", "age"} and isinstance(obj["age"], int)
    except (ValueError, KeyError, TypeError):
        ok = False
    check(st == 200 and ok, "json_schema output: %s" % j)
    st, j = call("/v1/chat/completions", {"messages": CHAT, "max_tokens": 200, "temperature": 0,
                                          "response_format": {"type": "json_object", "schema": schema}})
    try:
        ok = isinstance(json.loads(j["choices"][0]["message"]["content"]), dict)
    except (ValueError, KeyError, TypeError):
        ok = False
    check(st == 200 and ok, "json_object (with schema) output: %s" % j)
    # plain json_object: a tiny model may not close the object before max_tokens;
    # when it stops on its own the text must parse, else it must be a JSON start
    st, j = call("/v1/chat/completions", {"messages": CHAT, "max_tokens": 60, "temperature": 0,
                                          "response_format": {"type": "json_object"}})
    c = j["choices"][0] if st == 200 else {}
    txt = c.get("message", {}).get("content", "")
    if c.get("finish_reason") == "stop":
        try:
            ok = isinstance(json.loads(txt), dict)
        except ValueError:
            ok = False
    else:
        ok = txt.lstrip().startswith("{")
    check(ok, "json_object output: %s" % j)

    st, j = call("/tokenize", {"content": "Hello world, once upon a time"})
    toks = j.get("tokens", []) if st == 200 else []
    st2, j2 = call("/detokenize", {"tokens": toks})
    check(toks and st2 == 200 and j2["content"].strip() == "Hello world, once upon a time", "tokenize round trip")
    st, j = call("/v1/embeddings", {"input": ["hello", "world"]})
    check(st == 200 and len(j["data"]) == 2 and abs(sum(x * x for x in j["data"][0]["embedding"]) - 1) < 1e-3,
          "embeddings: %s" % str(j)[:200])


def bad_input():
    st, j = call("/v1/models", key=None)
    check(is_error(st, j, 401), "no key: %s %s" % (st, j))
    st, j = call("/v1/models", key="wrong-key-of-other-length")
    check(is_error(st, j, 401), "wrong key: %s" % st)
    st, j = call("/health", key=None)
    check(st == 200, "/health without key")
    cases = [
        ("/v1/completions", b'{"prompt": "x", ', 400, "malformed JSON"),
        ("/v1/completions", b'[1, 2]', 400, "not an object"),
        ("/v1/completions", b'{"prompt": "x", "temperature": "hot"}', 400, "temperature type"),
        ("/v1/completions", b'{"prompt": "x", "max_tokens": "many"}', 400, "max_tokens type"),
        ("/v1/completions", b'{"prompt": "x", "n": 100}', 400, "n range"),
        ("/v1/completions", b'{"prompt": 5}', 400, "prompt type"),
        ("/v1/completions", b'{"prompt": [1, 99999999]}', 400, "token id range"),
        ("/v1/completions", b'{"prompt": "x", "stop": [1]}', 400, "stop type"),
        ("/v1/completions", b'{"prompt": "x", "stream": "yes"}', 400, "stream type"),
        ("/v1/chat/completions", b'{"messages": "hi"}', 400, "messages type"),
        ("/v1/chat/completions", b'{"messages": [{"content": "hi"}]}', 400, "message without role"),
        ("/completion", b'{"prompt": "x", "grammar": "root ::= ("}', 400, "invalid grammar"),
        ("/v1/chat/completions", json.dumps({"messages": CHAT, "response_format": {
            "type": "json_schema", "json_schema": {"schema": {"type": "frob"}}}}).encode(), 400, "invalid schema"),
        ("/v1/completions", json.dumps({"prompt": "once " * 3000}).encode(), 400, "prompt too long"),
        ("/v1/completions", b'{"prompt": "' + b"a" * 70000 + b'"}', 413, "huge body"),
        ("/v1/embeddings", b'{"input": []}', 400, "empty embeddings input"),
        ("/tokenize", b'{"content": 3}', 400, "tokenize type"),
        ("/detokenize", b'{"tokens": [-1]}', 400, "detokenize id"),
        ("/no/such/route", b'{}', 404, "unknown route"),
    ]
    for path, raw, code, what in cases:
        st, j = call(path, raw=raw)
        check(is_error(st, j, code), "%s: got %s %s" % (what, st, str(j)[:200]))
    st, j = call("/health")
    check(st == 200 and j["status"] == "ok", "serving after bad input")


def slow_sender():
    """A client that sends part of a request and stalls is cut off after --conn-timeout (2 s)."""
    s = socket.create_connection((HOST, PORT))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    t0 = time.time()
    st, j = call("/health")
    check(st == 200, "serving while a slow sender stalls")
    s.settimeout(10)
    try:
        data = s.recv(4096)
        while data:  # an error response may come first, then the close
            data = s.recv(4096)
        closed = True
    except socket.timeout:
        closed = False
    s.close()
    check(closed and time.time() - t0 < 8, "slow sender not cut off (%.1fs)" % (time.time() - t0))
    # headers that never end
    s = socket.create_connection((HOST, PORT))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    s.settimeout(10)
    try:
        closed = s.recv(4096) is not None
    except socket.timeout:
        closed = False
    s.close()
    check(closed, "slow headers not cut off")


def parallel():
    """Greedy: N requests at once return what each returns alone."""
    prompts = ["Once upon a time", "The little dog", "Lily and Tom went", "One day, a big", "The sun was",
               "Tim had a red", "In the park there", "Mom said"]

    def one(i):
        if i % 2:
            j = call("/v1/chat/completions", {"messages": [{"role": "user", "content": prompts[i]}],
                                              "max_tokens": 48, "temperature": 0})[1]
            return j["choices"][0]["message"]["content"]
        return call("/v1/completions", {"prompt": prompts[i], "max_tokens": 48, "temperature": 0})[1][
            "choices"][0]["text"]

    serial = [one(i) for i in range(len(prompts))]
    par = [None] * len(prompts)

    def run(i):
        par[i] = one(i)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    bad = [i for i in range(len(prompts)) if serial[i] != par[i]]
    check(not bad, "parallel != serial for %s: %s" % (bad, [(serial[i], par[i]) for i in bad]))
    st, m = call("/metrics")
    check(st == 200 and "lamina_requests_total" in m and "lamina_slots_busy 0" in m, "metrics: %s" % str(m)[:300])


for f in (basic, sampling, formats, bad_input, slow_sender, parallel):
    try:
        f()
    except Exception as e:  # a crash of the checks is a failure, not a pass
        check(False, "%s raised %r" % (f.__name__, e))
print("serve_check: %d passed, %d failed" % (passes, len(fails)))
sys.exit(1 if fails else 0)
