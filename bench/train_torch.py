#!/usr/bin/env python3
"""train_torch.py - the training step of `lamina train` written in PyTorch, to
compare training speed on the CPU (docs/training.md, "Speed").

The same model as lamina's training graph (src/train/model.c): a LLaMA with
RMSNorm, RoPE on adjacent pairs, causal attention (grouped-query when
--kv-heads < --heads), a SwiGLU feed-forward and an untied output matrix, F32;
cross-entropy over every position; AdamW (betas 0.9/0.95, weight decay 0.1 on
matrices) with gradient-norm clipping at 1. Batches are random token windows
(speed does not depend on the data). Prints tokens per second over --steps
timed steps after --warmup untimed ones.

Run with Debian's python3-torch (/usr/bin/python3):
  /usr/bin/python3 bench/train_torch.py --vocab 1024 --dim 128 --layers 4 \\
      --heads 4 --ff 352 --ctx 128 --batch 16 --threads 2
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(T, d, base):
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cos(ang), torch.sin(ang)


def rope(x, cos, sin):
    # x: [B, T, H, d]; pairs (2i, 2i+1) rotate by angle pos * base^(-2i/d)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


class Layer(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        d = a.dim // a.heads
        self.h, self.hkv, self.d = a.heads, a.kv_heads, d
        self.attn_norm = RMSNorm(a.dim, a.norm_eps)
        self.wq = torch.nn.Linear(a.dim, a.dim, bias=False)
        self.wk = torch.nn.Linear(a.dim, d * a.kv_heads, bias=False)
        self.wv = torch.nn.Linear(a.dim, d * a.kv_heads, bias=False)
        self.wo = torch.nn.Linear(a.dim, a.dim, bias=False)
        self.ffn_norm = RMSNorm(a.dim, a.norm_eps)
        self.gate = torch.nn.Linear(a.dim, a.ff, bias=False)
        self.up = torch.nn.Linear(a.dim, a.ff, bias=False)
        self.down = torch.nn.Linear(a.ff, a.dim, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, E = x.shape
        h = self.attn_norm(x)
        q = rope(self.wq(h).view(B, T, self.h, self.d), cos, sin).transpose(1, 2)
        k = rope(self.wk(h).view(B, T, self.hkv, self.d), cos, sin).transpose(1, 2)
        v = self.wv(h).view(B, T, self.hkv, self.d).transpose(1, 2)
        if self.hkv != self.h:
            k = k.repeat_interleave(self.h // self.hkv, dim=1)
            v = v.repeat_interleave(self.h // self.hkv, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d) + mask
        o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, E)
        x = x + self.wo(o)
        f = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(f)) * self.up(f))


class Model(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embd = torch.nn.Embedding(a.vocab, a.dim)
        self.layers = torch.nn.ModuleList([Layer(a) for _ in range(a.layers)])
        self.norm = RMSNorm(a.dim, a.norm_eps)
        self.out = torch.nn.Linear(a.dim, a.vocab, bias=False)
        cos, sin = rope_tables(a.ctx, a.dim // a.heads, a.rope_base)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", torch.full((a.ctx, a.ctx), float("-inf")).triu(1))

    def forward(self, tok):
        x = self.embd(tok)
        for l in self.layers:
            x = l(x, self.cos, self.sin, self.mask)
        return self.out(self.norm(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--ff", type=int, default=0)
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--rope-base", type=float, default=10000.0)
    a = p.parse_args()
    a.kv_heads = a.kv_heads or a.heads
    a.ff = a.ff or (a.dim * 8 // 3 + 31) // 32 * 32
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    m = Model(a)
    decay = [q for n, q in m.named_parameters() if q.dim() >= 2]
    no_decay = [q for n, q in m.named_parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(q.numel() for q in m.parameters())
    g = torch.Generator().manual_seed(2)

    def step():
        tok = torch.randint(0, a.vocab, (a.batch, a.ctx + 1), generator=g)
        logits = m(tok[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), tok[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t0
    tps = a.steps * a.batch * a.ctx / dt
    print(f"torch {torch.__version__} threads {a.threads}: {n_params / 1e6:.2f} M parameters, "
          f"{a.steps} steps of {a.batch}x{a.ctx} tokens in {dt:.2f} s: {tps:.0f} tokens/s")


if __name__ == "__main__":
    main()
