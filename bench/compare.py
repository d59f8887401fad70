#!/usr/bin/env python3
"""compare.py - lamina vs llama.cpp on the same GGUF files, in one run.

For each model, runs llama.cpp's llama-bench and `lamina bench` alternately
(A B A B ...), both with weights read into memory (-mmp 0) and the same thread
count, and prints a markdown table: each engine's t/s (best round's mean), the
ratio lamina / llama.cpp, and for generation the memory-bandwidth bound
(bytes of weights per token / measured read bandwidth).

    bench/compare.py --llama-bench /path/to/llama-bench --lamina build/tools/lamina \
        --bandwidth-gbs 15.3 -t 2 -p 512 -n 128 --rounds 2 model1.gguf model2.gguf

-d 0,4096 passes llama-bench's depth (-d, --n-depth) to both engines: each test
then also runs with that many tokens already in the KV cache ("pp512 @ d4096";
needs a llama-bench with -d, 2025 or newer).

-t 1,2,4,8,16 runs every test at each thread count (one run of each engine per
round covers them all, as llama-bench's own -t list does); the table then has
a threads column. Thread scaling reads down it.

-ngl N passes -ngl to both engines (GPU layers); --llama-args / --lamina-args
add options for one engine only, e.g. --llama-args "-fa 1" (llama.cpp's flash
attention) on a GPU. An engine that fails prints its command and the end of
its stderr and is left out of the later rounds (its columns read "failed").

llama.cpp is never built or fetched by this script: pass the path of a
llama-bench you built yourself, outside this repository.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time


RUN_TIMEOUT = float(os.environ.get("COMPARE_TIMEOUT", "0")) or None  # seconds per engine run; unset: none


def run_json(cmd):
    """The engine's JSON records, or None (and its stderr's end printed) when it fails or
    runs past COMPARE_TIMEOUT seconds (the GPU check sets it: a hung engine must not eat the run)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        sys.stderr.write("failed (timed out after %.0f s): %s\n" % (RUN_TIMEOUT, " ".join(shlex.quote(c) for c in cmd)))
        return None
    try:
        if p.returncode == 0:
            return json.loads(p.stdout)
    except ValueError:
        pass
    sys.stderr.write("failed (exit %d): %s\n%s\n" % (p.returncode, " ".join(shlex.quote(c) for c in cmd),
                                                   "\n".join(p.stderr.splitlines()[-20:])))
    return None


def test_name(n_prompt, n_gen, n_depth):
    """llama-bench's test name: "pp512", "tg128", "pp512 @ d4096"."""
    name = "pp%d" % n_prompt if n_prompt else "tg%d" % n_gen
    return name + (" @ d%d" % n_depth if n_depth else "")


def thread_counts(arg):
    """-t's value: "2" or "1,2,4,8,16" -> [2] or [1, 2, 4, 8, 16] (each >= 1)."""
    try:
        counts = [int(t) for t in arg.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("-t wants thread counts >= 1, comma-separated: %r" % arg)
    return counts


def run_engine(args, model, cmd_prefix):
    """(t/s per (thread count, test), {"size": model bytes, "desc": model type}); test: "pp512", "tg128", ...;
    None when the engine failed."""
    cmd = cmd_prefix + ["-m", model, "-t", ",".join(str(t) for t in args.threads), "-p", str(args.p),
                        "-n", str(args.n), "-r", str(args.reps), "-mmp", "0", "-o", "json"]
    if args.depth != "0":
        cmd += ["-d", args.depth]
    if args.ngl is not None:
        cmd += ["-ngl", str(args.ngl)]
    records = run_json(cmd)
    if records is None:
        return None
    res, info = {}, {}
    for r in records:
        if "build_commit" in r and not args.build_shown:
            args.build_shown = True
            sys.stderr.write("llama-bench build: %s (%s), backends %s, gpu %s\n" % (
                r["build_commit"], r.get("build_number", "?"), r.get("backends", "?"), r.get("gpu_info", "?")))
        key = (r.get("n_threads", args.threads[0]), test_name(r["n_prompt"], r["n_gen"], r.get("n_depth", 0)))
        res[key] = r["avg_ts"]
        info = {"size": r["model_size"], "desc": r["model_type"]}
    return res, info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--lamina", default="build/tools/lamina")
    ap.add_argument("--bandwidth-gbs", type=float, default=0.0, help="read bandwidth for the tg bound")
    ap.add_argument("-t", "--threads", type=thread_counts, default=[2], help="thread counts, comma-separated")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-d", "--n-depth", dest="depth", default="0",
                    help="depths, comma-separated (llama-bench -d): tokens already in the KV cache")
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds per model (best round kept)")
    ap.add_argument("-ngl", "--n-gpu-layers", dest="ngl", type=int, help="layers on the GPU, both engines")
    ap.add_argument("--llama-args", default="", help="more llama-bench options, e.g. \"-fa 1\"")
    ap.add_argument("--lamina-args", default="", help="more lamina bench options")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    args.build_shown = False
    multi = len(args.threads) > 1
    engines = (("llama.cpp", [args.llama_bench] + shlex.split(args.llama_args)),
               ("lamina", [args.lamina, "bench"] + shlex.split(args.lamina_args)))

    rows = []
    for model in args.models:
        best = {"llama.cpp": {}, "lamina": {}}  # best t/s per (threads, test)
        info = {"llama.cpp": {}, "lamina": {}}
        failed = set()
        for rnd in range(args.rounds):
            for name, prefix in engines:
                if name in failed:
                    continue
                start = time.time()
                got = run_engine(args, model, prefix)
                if got is None:
                    failed.add(name)
                    continue
                res, info[name] = got
                sys.stderr.write("round %d, %s: %s (%.1f s)\n" % (rnd + 1, name, ", ".join(
                    "%s%s %.2f t/s" % (k[1], " t%d" % k[0] if multi else "", v) for k, v in res.items()),
                    time.time() - start))
                for k, v in res.items():
                    best[name][k] = max(best[name].get(k, 0.0), v)
        depths = [int(d) for d in args.depth.split(",")]
        tests = [(t, test_name(p, n, d)) for t in args.threads for d in depths
                 for p, n in ((args.p, 0), (0, args.n)) if p or n]  # -p 0 or -n 0: that test is not run
        for key in tests:
            threads, test = key
            a, b = best["llama.cpp"].get(key, 0.0), best["lamina"].get(key, 0.0)
            bound = ""
            if test.startswith("tg") and args.bandwidth_gbs > 0 and "size" in info["lamina"]:
                bound = "%.1f" % (args.bandwidth_gbs * 1e9 / info["lamina"]["size"])
            desc = info["lamina"].get("desc", info["llama.cpp"].get("desc", "?"))
            rows.append((os.path.basename(model), desc) + (("%d" % threads,) if multi else ()) + (
                test, "%.2f" % a if a else "failed", "%.2f" % b if b else "failed",
                "%.2fx" % (b / a) if a and b else "-", bound))
        sys.stderr.write("done %s\n" % model)

    print("| model file | type |%s test | llama.cpp t/s | lamina t/s | lamina / llama.cpp | tg bound t/s |" % (
        " threads |" if multi else ""))
    print("|---|---|%s---|---:|---:|---:|---:|" % ("---:|" if multi else ""))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
