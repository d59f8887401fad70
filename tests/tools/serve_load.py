#!/usr/bin/env python3
"""serve_load.py URL SECONDS [CLIENTS [SERVER_PID]] - load test of `lamina serve`.

CLIENTS (default 64) threads send requests for SECONDS: a mix of chat and
completions, streaming and not, with random max_tokens; one request in six is
a stream the client drops after a few events. Every request must end as
expected (200 with a complete body, or our own disconnect): a request that
fails or is lost counts as a failure. Afterwards every slot must be free and
the queue empty (/health), and, with SERVER_PID, the server's RSS after the
warm-up (first quarter) and at the end is reported. Exit status 1 on failure.
Standard library only.
"""
import http.client
import json
import random
import sys
import threading
import time

URL, SECONDS = sys.argv[1], float(sys.argv[2])
CLIENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 64
PID = int(sys.argv[4]) if len(sys.argv) > 4 else None
HOST, PORT = URL.split("//")[1].split(":")[0], int(URL.rsplit(":", 1)[1])
lock = threading.Lock()
stats = {"ok": 0, "dropped": 0, "failed": 0, "started": 0, "tokens": 0}
errors = []
PROMPTS = ["Once upon a time", "The cat sat", "Tom and Lily", "A big red ball", "The sun was hot", "One day"]


def rss_kib():
    if not PID:
        return None
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def one(rng):
    chat = rng.random() < 0.5
    stream = rng.random() < 0.6
    drop = stream and rng.random() < 0.28
    n = rng.randint(8, 64)
    p = rng.choice(PROMPTS)
    body = {"max_tokens": n, "temperature": 0.8, "stream": stream}
    if chat:
        body["messages"] = [{"role": "user", "content": p}]
    else:
        body["prompt"] = p
    path = "/v1/chat/completions" if chat else "/v1/completions"
    conn = http.client.HTTPConnection(HOST, PORT, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return "failed", "status %d: %s" % (r.status, r.read()[:200])
        if not stream:
            j = json.loads(r.read())
            if not j["choices"] or j["choices"][0]["finish_reason"] not in ("stop", "length"):
                return "failed", "bad body %s" % j
            return "ok", j["usage"]["completion_tokens"]
        events, keep = 0, rng.randint(1, 4)
        buf = b""
        while True:
            line = r.readline()
            if not line:
                return "failed", "stream ended without [DONE] after %d events" % events
            if line.startswith(b"data: "):
                events += 1
                if line.strip() == b"data: [DONE]":
                    return "ok", events
                json.loads(line[6:])
                if drop and events >= keep:
                    return "dropped", 0
            buf = line
    except Exception as e:  # noqa: BLE001 - any exception is a failed request
        return "failed", repr(e)
    finally:
        conn.close()


def client(seed, deadline):
    rng = random.Random(seed)
    while time.time() < deadline:
        with lock:
            stats["started"] += 1
        kind, info = one(rng)
        with lock:
            stats[kind] += 1
            if kind == "failed" and len(errors) < 10:
                errors.append(info)


def get(path):
    conn = http.client.HTTPConnection(HOST, PORT, timeout=30)
    conn.request("GET", path)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return data


def main():
    t0 = time.time()
    deadline = t0 + SECONDS
    ts = [threading.Thread(target=client, args=(i, deadline)) for i in range(CLIENTS)]
    for t in ts:
        t.start()
    time.sleep(SECONDS / 4)
    rss_warm = rss_kib()
    for t in ts:
        t.join()
    # every slot free and nothing queued shortly after the last response
    free = False
    for _ in range(50):
        h = json.loads(get("/health"))
        if h["slots_processing"] == 0 and h["requests_queued"] == 0:
            free = True
            break
        time.sleep(0.1)
    rss_end = rss_kib()
    metrics = get("/metrics").decode()
    cancelled = [l for l in metrics.splitlines() if l.startswith("lamina_requests_cancelled_total")]
    lost = stats["started"] - stats["ok"] - stats["dropped"] - stats["failed"]
    print("load: %d clients, %.0f s: %d requests, %d ok, %d dropped by the client, %d failed, %d lost; "
          "slots free at the end: %s; %s" % (CLIENTS, time.time() - t0, stats["started"], stats["ok"],
                                             stats["dropped"], stats["failed"], lost, free,
                                             cancelled[0] if cancelled else "no cancel metric"))
    if rss_warm:
        print("load: server RSS after warm-up %d KiB, at the end %d KiB (%+.1f%%)" %
              (rss_warm, rss_end, 100.0 * (rss_end - rss_warm) / rss_warm))
    for e in errors:
        print("  error:", e, file=sys.stderr)
    return 0 if stats["failed"] == 0 and lost == 0 and free and stats["ok"] > 0 else 1


sys.exit(main())
