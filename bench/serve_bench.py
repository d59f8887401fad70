#!/usr/bin/env python3
"""serve_bench.py URL [--streams 8] [--tokens 128] [--prompt-tokens 512] [--rounds 1]

Benchmark of an OpenAI-compatible completion server (lamina serve or
llama.cpp's llama-server; both have /tokenize and /v1/completions):

- generation: STREAMS concurrent streaming requests of TOKENS tokens each
  (short prompt, temperature 0, ignore_eos) -> aggregate generation tokens/s:
  STREAMS * (TOKENS - 1) tokens after each stream's first one, over the time
  from the first stream's first token to the last stream's last (chunks may
  hold several tokens, so tokens are counted from max_tokens, not chunks);
  and end-to-end (STREAMS * TOKENS / wall time of the whole batch);
- time to first token of one streaming request with a PROMPT_TOKENS-token
  prompt on an idle server (token ids from the server's /tokenize, with a
  fresh random start each round so that no prompt cache helps).

Best of ROUNDS for each number. Standard library only.
"""
import argparse
import http.client
import json
import random
import threading
import time

WORDS = ("the cat dog ran far away under a big red tree while birds sang softly in morning light and "
         "children played near old stone walls beside quiet rivers").split()


def post(host, port, path, body):
    c = http.client.HTTPConnection(host, port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("%s: %d %s" % (path, r.status, data[:200]))
    return json.loads(data)


def stream(host, port, body, out):
    """Stream one completion; out gets (t_start, [t of each content chunk])."""
    c = http.client.HTTPConnection(host, port, timeout=600)
    t0 = time.time()
    c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    while True:
        line = r.readline()
        if not line:
            break
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        j = json.loads(line[6:])
        if j.get("choices") and j["choices"][0].get("text"):
            times.append(time.time())
    c.close()
    out.append((t0, times))


def generation(host, port, n_streams, n_tokens):
    body = {"prompt": "Once upon a time", "max_tokens": n_tokens, "temperature": 0, "ignore_eos": True}
    out = []
    ts = [threading.Thread(target=stream, args=(host, port, body, out)) for _ in range(n_streams)]
    t0 = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    t1 = time.time()
    if len(out) != n_streams or any(not times for _, times in out):
        raise RuntimeError("a stream produced no tokens")
    total = n_streams * n_tokens
    start = min(times[0] for _, times in out)
    end = max(times[-1] for _, times in out)
    gen = n_streams * (n_tokens - 1) / (end - start) if end > start else 0.0
    return gen, total / (t1 - t0), total


def ttft(host, port, n_prompt):
    text = " ".join(random.choice(WORDS) for _ in range(n_prompt * 2))
    toks = post(host, port, "/tokenize", {"content": text})["tokens"]
    toks = [random.randint(1000, 20000)] + toks[:n_prompt - 1]  # a fresh start defeats prompt caches
    out = []
    stream(host, port, {"prompt": toks, "max_tokens": 2, "temperature": 0}, out)
    t0, times = out[0]
    return times[0] - t0 if times else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    host, port = a.url.split("//")[-1].split(":")[0], int(a.url.rsplit(":", 1)[1].strip("/"))
    post(host, port, "/v1/completions", {"prompt": "Hello", "max_tokens": 4})  # warm-up
    best_gen, best_e2e, best_ttft = 0.0, 0.0, float("inf")
    for _ in range(a.rounds):
        gen, e2e, total = generation(host, port, a.streams, a.tokens)
        t = ttft(host, port, a.prompt_tokens)
        print("round: generation %.2f t/s (all %d streams), end-to-end %.2f t/s (%d tokens), TTFT(%d) %.3f s"
              % (gen, a.streams, e2e, total, a.prompt_tokens, t), flush=True)
        best_gen, best_e2e, best_ttft = max(best_gen, gen), max(best_e2e, e2e), min(best_ttft, t)
    print("best: generation %.2f t/s, end-to-end %.2f t/s, TTFT(%d) %.3f s"
          % (best_gen, best_e2e, a.prompt_tokens, best_ttft))


if __name__ == "__main__":
    main()
