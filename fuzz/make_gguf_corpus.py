#!/usr/bin/env python3
"""make_gguf_corpus.py - writes the seed corpus of fuzz_gguf (fuzz/corpus/gguf).

A GGUF writer of its own (from ggml's docs/gguf.md, independent of lamina's C
writer) makes small valid files of versions 1, 2 and 3 covering every value
type, then edge cases and broken variants (bad alignment, nested array, bad
n_dims/type/offset, truncation). Files found by libFuzzer are added next to
these by hand (named bad-fz-* and ok-fz-*, one per distinct reader message
plus a sample of accepted ones); this script does not delete them.
Usage: python3 fuzz/make_gguf_corpus.py [OUT_DIR]
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: 'B', I8: 'b', U16: 'H', I16: 'h', U32: 'I', I32: 'i', F32: 'f', BOOL: 'B', U64: 'Q', I64: 'q', F64: 'd'}
F32_T, F16_T, Q4_0, Q8_0, Q4_K, I8_T, BF16 = 0, 1, 2, 8, 12, 24, 30
TSIZE = {F32_T: (1, 4), F16_T: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q4_K: (256, 144), I8_T: (1, 1), BF16: (1, 2)}


class Gguf:
    def __init__(self, version=3, align=32):
        self.version, self.align, self.kvs, self.tensors = version, align, [], []

    def cnt(self, n):
        return struct.pack('<I' if self.version == 1 else '<Q', n)

    def s(self, text):
        b = text.encode() if isinstance(text, str) else text
        return self.cnt(len(b)) + b

    def val(self, t, v):
        if t == STR:
            return self.s(v)
        if t == ARR:
            et, items = v
            return struct.pack('<I', et) + self.cnt(len(items)) + b''.join(self.val(et, x) for x in items)
        return struct.pack('<' + SCALAR[t], v)

    def kv(self, key, t, v):
        self.kvs.append(self.s(key) + struct.pack('<I', t) + self.val(t, v))
        return self

    def tensor(self, name, ttype, ne, data=None):
        blck, bsz = TSIZE[ttype]
        size = ne[0] // blck * bsz
        for d in ne[1:]:
            size *= d
        if data is None:
            data = bytes((i * 7 + len(name)) & 0xff for i in range(size))
        self.tensors.append((name, ttype, ne, data))
        return self

    def build(self):
        out = b'GGUF' + struct.pack('<I', self.version) + self.cnt(len(self.tensors)) + self.cnt(len(self.kvs))
        out += b''.join(self.kvs)
        off, blobs = 0, []
        for name, ttype, ne, data in self.tensors:
            out += self.s(name) + struct.pack('<I', len(ne)) + b''.join(self.cnt(d) for d in ne)
            out += struct.pack('<IQ', ttype, off)
            pad = (-len(data)) % self.align
            blobs.append(data + b'\0' * pad)
            off += len(data) + pad
        if self.tensors:
            out += b'\0' * ((-len(out)) % self.align)
        return out + b''.join(blobs)


def all_types(version):
    g = Gguf(version)
    g.kv('general.architecture', STR, 'llama').kv('u8', U8, 200).kv('i8', I8, -100).kv('u16', U16, 60000)
    g.kv('i16', I16, -30000).kv('u32', U32, 4000000000).kv('i32', I32, -2000000000).kv('f32', F32, 1e-5)
    g.kv('bool', BOOL, 1).kv('u64', U64, 1 << 40).kv('i64', I64, -(1 << 40)).kv('f64', F64, 0.25)
    g.kv('utf8', STR, 'h\u00e9llo\n"q"\\').kv('empty', STR, '')
    g.kv('tokens', ARR, (STR, ['<unk>', '<s>', '</s>', ' a', 'b', '', 'c\u00e9', 'd', 'e', 'f']))
    g.kv('scores', ARR, (F32, [0.0, -1.5, 2.25])).kv('types', ARR, (I32, [2, 3, 3, 1]))
    g.kv('bools', ARR, (BOOL, [1, 0, 1])).kv('no_items', ARR, (U64, []))
    g.tensor('token_embd.weight', F32_T, [4, 3]).tensor('q', Q8_0, [32, 2]).tensor('norm', F16_T, [4])
    return g


def tiny_llama():
    g = Gguf(3)
    g.kv('general.architecture', STR, 'llama').kv('llama.embedding_length', U32, 32).kv('llama.block_count', U32, 1)
    g.kv('llama.attention.head_count', U32, 2).kv('llama.attention.layer_norm_rms_epsilon', F32, 1e-5)
    g.kv('tokenizer.ggml.model', STR, 'llama').kv('tokenizer.ggml.tokens', ARR, (STR, ['<unk>', '<s>', '</s>', 'x']))
    g.kv('tokenizer.ggml.scores', ARR, (F32, [0, 0, 0, -1])).kv('tokenizer.ggml.token_type', ARR, (I32, [2, 3, 3, 1]))
    for name, t, ne in [('token_embd.weight', Q4_0, [32, 4]), ('output_norm.weight', F32_T, [32]),
                        ('blk.0.attn_q.weight', Q8_0, [32, 32]), ('blk.0.ffn_up.weight', Q4_K, [256, 1]),
                        ('blk.0.x4d', BF16, [2, 1, 3, 2]), ('blk.0.empty', I8_T, [8, 0])]:
        g.tensor(name, t, ne)
    return g


def broken():
    """(name, bytes) of files the reader must refuse."""
    out = []
    base = tiny_llama().build()
    out.append(('bad-truncated-meta', base[:200]))
    out.append(('bad-truncated-data', base[:-1]))
    out.append(('bad-magic', b'GGUG' + base[4:]))
    out.append(('bad-version-4', base[:4] + struct.pack('<I', 4) + base[8:]))
    out.append(('bad-big-endian', base[:4] + struct.pack('>I', 3) + base[8:]))
    out.append(('bad-n-kv-huge', base[:16] + struct.pack('<Q', 1 << 62) + base[24:]))
    out.append(('bad-n-tensors-huge', base[:8] + struct.pack('<Q', (1 << 64) - 1) + base[16:]))
    for name, align in [('bad-align-0', 0), ('bad-align-3', 3)]:
        out.append((name, Gguf(3).kv('general.alignment', U32, align).tensor('t', F32_T, [8]).build()))
    out.append(('bad-align-u64', Gguf(3).kv('general.alignment', U64, 64).build()))
    g = Gguf(3).kv('nested', ARR, (U8, []))
    nested = g.build().replace(struct.pack('<I', ARR) + struct.pack('<I', U8), struct.pack('<II', ARR, ARR))
    out.append(('bad-nested-array', nested))
    out.append(('bad-bool-2', Gguf(3).kv('b', BOOL, 2).build()))
    out.append(('bad-dup-key', Gguf(3).kv('k', U32, 1).kv('k', U32, 2).build()))
    out.append(('ok-dup-key-same-value', Gguf(3).kv('k', U32, 1).kv('k', U32, 1).build()))
    out.append(('bad-dup-tensor', Gguf(3).tensor('t', F32_T, [8]).tensor('t', F32_T, [8]).build()))
    for nd in (0, 5):
        f = bytearray(Gguf(3).tensor('t', F32_T, [8]).build())
        f[24 + 8 + 1:24 + 8 + 1 + 4] = struct.pack('<I', nd)
        out.append(('bad-n-dims-%d' % nd, bytes(f)))
    for t in (4, 5, 99):
        f = bytearray(Gguf(3).tensor('t', F32_T, [8]).build())
        f[24 + 9 + 4 + 8:24 + 9 + 4 + 8 + 4] = struct.pack('<I', t)
        out.append(('bad-type-%d' % t, bytes(f)))
    f = bytearray(Gguf(3).tensor('t', F32_T, [8]).build())
    f[24 + 9 + 4 + 8 + 4:24 + 9 + 4 + 8 + 4 + 8] = struct.pack('<Q', 16)
    out.append(('bad-offset-unaligned', bytes(f)))
    f[24 + 9 + 4 + 8 + 4:24 + 9 + 4 + 8 + 4 + 8] = struct.pack('<Q', 1 << 20)
    out.append(('bad-offset-past-eof', bytes(f)))
    f = bytearray(Gguf(3).tensor('t', F32_T, [8, 2]).build())
    f[24 + 9 + 4:24 + 9 + 4 + 16] = struct.pack('<QQ', 1 << 62, 1 << 62)
    out.append(('bad-dims-overflow', bytes(f)))
    out.append(('bad-q4_0-ne0', Gguf(3).tensor('t', Q4_0, [64]).build().replace(struct.pack('<Q', 64), struct.pack('<Q', 48), 1)))
    return out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus', 'gguf')
    os.makedirs(out_dir, exist_ok=True)
    files = [('v3-all-types', all_types(3).build()), ('v2-all-types', all_types(2).build()),
             ('v1-all-types', all_types(1).build()), ('v3-tiny-llama', tiny_llama().build()),
             ('v3-empty', Gguf(3).build()), ('v3-align-64', Gguf(3, 64).kv('general.alignment', U32, 64)
                                                     .tensor('a', F32_T, [3]).tensor('b', F16_T, [5, 2]).build()),
             ('v3-vocab-only', Gguf(3).kv('tokenizer.ggml.merges', ARR, (STR, ['a b', 'ab c'])).build())]
    files += broken()
    for name, data in files:
        with open(os.path.join(out_dir, name + '.gguf'), 'wb') as f:
            f.write(data)
    print('%d files, %d bytes' % (len(files), sum(len(d) for _, d in files)))


if __name__ == '__main__':
    main()
