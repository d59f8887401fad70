#!/usr/bin/env python3
"""gen_bert_fixture.py - writes tests/api/data/bert-tiny.gguf, the tiny
random-weight BERT of tests/api/test_bert.c (standard library only).

  python3 tests/api/gen_bert_fixture.py [bert-bge vocab gguf] [out gguf]

The vocabulary is a ~400-token WordPiece subset of ggml-vocab-bert-bge.gguf
(under ../shared/models/ggml-vocab/): the specials [PAD] [UNK] [CLS] [SEP]
[MASK], the single-character word starts, the first 304 ordinary tokens
(common words and suffixes) and the continuation letters, so that any
lowercase ASCII text tokenizes. Hyperparameters: n_embd 32, 4 heads, 2
layers, n_ff 64, n_ctx_train 64, 2 token types, non-causal attention, mean
pooling. Weights are F32 from Python's random with seed 20240201, so the
output is the same bytes on every run.
"""
import random
import struct
import sys

VOCAB = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/models/ggml-vocab/ggml-vocab-bert-bge.gguf"
OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/api/data/bert-tiny.gguf"
N_EMBD, N_HEAD, N_LAYER, N_FF, N_CTX, N_TYPES = 32, 4, 2, 64, 64, 2

# ---- reading the bge vocabulary (GGUF v2/v3 metadata) ----
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read_kv(path):
    d = open(path, "rb").read()
    pos = [4]

    def rd(fmt):
        v = struct.unpack_from("<" + fmt, d, pos[0])[0]
        pos[0] += struct.calcsize("<" + fmt)
        return v

    def rstr():
        n = rd("Q")
        s = d[pos[0]:pos[0] + n].decode("utf-8")
        pos[0] += n
        return s

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd("I"), rd("Q")
            return [rval(et) for _ in range(n)]
        return rd(SCALAR[t])

    assert d[:4] == b"GGUF"
    rd("I")
    rd("Q")
    kv = {}
    for _ in range(rd("Q")):
        k = rstr()
        kv[k] = rval(rd("I"))
    return kv


def pick_vocab(kv):
    toks = kv["tokenizer.ggml.tokens"]
    ids = [0, 100, 101, 102, 103]                      # [PAD] [UNK] [CLS] [SEP] [MASK]
    ids += list(range(999, 1071))                      # "\u2581!" .. "\u2581~"
    ids += list(range(1996, 2300))                     # the, of, and, ... and suffixes
    have = {toks[i] for i in ids}
    for i, t in enumerate(toks):                       # continuation letters
        if len(t) == 1 and "a" <= t <= "z" and t not in have:
            ids.append(i)
            have.add(t)
    types = kv["tokenizer.ggml.token_type"]
    return [toks[i] for i in ids], [types[i] for i in ids]


# ---- writing GGUF v3 ----
def s_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def s_kv(key, t, v):
    out = s_str(key) + struct.pack("<I", t)
    if t == 8:
        return out + s_str(v)
    if t == 9:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        for it in items:
            out += s_str(it) if et == 8 else struct.pack("<" + SCALAR[et], it)
        return out
    return out + struct.pack("<" + SCALAR[t], v)


def main():
    tokens, ttypes = pick_vocab(read_kv(VOCAB))
    n_vocab = len(tokens)
    rng = random.Random(20240201)

    def gauss(n, sd, mean=0.0):
        return [mean + rng.gauss(0.0, sd) for _ in range(n)]

    E, F = N_EMBD, N_FF
    tensors = []  # (name, ne, values)

    def add(name, ne, vals):
        tensors.append((name, ne, vals))

    add("token_embd.weight", [E, n_vocab], gauss(E * n_vocab, 0.5))
    add("token_types.weight", [E, N_TYPES], gauss(E * N_TYPES, 0.5))
    add("position_embd.weight", [E, N_CTX], gauss(E * N_CTX, 0.5))
    add("token_embd_norm.weight", [E], gauss(E, 0.1, 1.0))
    add("token_embd_norm.bias", [E], gauss(E, 0.1))
    for il in range(N_LAYER):
        p = "blk.%d." % il
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            add(p + t + ".weight", [E, E], gauss(E * E, 0.3))
            add(p + t + ".bias", [E], gauss(E, 0.1))
        add(p + "attn_output_norm.weight", [E], gauss(E, 0.1, 1.0))
        add(p + "attn_output_norm.bias", [E], gauss(E, 0.1))
        add(p + "ffn_up.weight", [E, F], gauss(E * F, 0.25))
        add(p + "ffn_up.bias", [F], gauss(F, 0.1))
        add(p + "ffn_down.weight", [F, E], gauss(F * E, 0.25))
        add(p + "ffn_down.bias", [E], gauss(E, 0.1))
        add(p + "layer_output_norm.weight", [E], gauss(E, 0.1, 1.0))
        add(p + "layer_output_norm.bias", [E], gauss(E, 0.1))

    kvs = [
        s_kv("general.architecture", 8, "bert"),
        s_kv("general.name", 8, "bert-tiny-random"),
        s_kv("general.file_type", 4, 0),
        s_kv("bert.context_length", 4, N_CTX),
        s_kv("bert.embedding_length", 4, E),
        s_kv("bert.feed_forward_length", 4, F),
        s_kv("bert.block_count", 4, N_LAYER),
        s_kv("bert.attention.head_count", 4, N_HEAD),
        s_kv("bert.attention.layer_norm_epsilon", 6, 1e-12),
        s_kv("bert.attention.causal", 7, False),
        s_kv("bert.pooling_type", 4, 1),
        s_kv("tokenizer.ggml.model", 8, "bert"),
        s_kv("tokenizer.ggml.token_type_count", 4, N_TYPES),
        s_kv("tokenizer.ggml.tokens", 9, (8, tokens)),
        s_kv("tokenizer.ggml.token_type", 9, (5, ttypes)),
        s_kv("tokenizer.ggml.bos_token_id", 4, 2),  # later llama.cpp reads [CLS] here
        s_kv("tokenizer.ggml.unknown_token_id", 4, 1),
        s_kv("tokenizer.ggml.seperator_token_id", 4, 3),
        s_kv("tokenizer.ggml.padding_token_id", 4, 0),
        s_kv("tokenizer.ggml.cls_token_id", 4, 2),
        s_kv("tokenizer.ggml.mask_token_id", 4, 4),
    ]
    ALIGN = 32
    infos, data, off = b"", b"", 0
    for name, ne, vals in tensors:
        infos += s_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", 0, off)  # F32
        blob = struct.pack("<%df" % len(vals), *vals)
        pad = (-len(blob)) % ALIGN
        data += blob + b"\0" * pad
        off += len(blob) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(OUT, "wb") as f:
        f.write(head + data)
    print("%s: %d tokens, %d tensors, %d bytes" % (OUT, n_vocab, len(tensors), len(head) + len(data)))


main()
