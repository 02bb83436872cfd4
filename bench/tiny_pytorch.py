#!/usr/bin/python3
"""The tiny preset's model in plain PyTorch (Debian's python3-torch), for the
throughput comparison in bench/train_throughput.cpp. Same shapes, same
threads, same optimizer; prints tokens/s as JSON.

usage: tiny_pytorch.py D LAYERS HEADS FFN CONTEXT BATCH VOCAB STEPS THREADS
"""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

d, layers, heads, ffn, context, batch, vocab, steps, threads = map(int, sys.argv[1:10])
torch.set_num_threads(threads)
torch.manual_seed(0)
dh = d // heads


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


def rope(x, cos, sin):
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        h = self.n1(x)
        q = rope(self.wq(h).view(B, T, heads, dh).transpose(1, 2), cos, sin)
        k = rope(self.wk(h).view(B, T, heads, dh).transpose(1, 2), cos, sin)
        v = self.wv(h).view(B, T, heads, dh).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.wo((att @ v).transpose(1, 2).reshape(B, T, d))
        h = self.n2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        T = x.shape[1]
        inv = 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
        cos, sin = ang.cos().float(), ang.sin().float()
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        h = self.embed(x)
        for b in self.blocks:
            h = b(h, cos, sin, mask)
        return self.head(self.norm(h))


model = Model()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
g = torch.Generator().manual_seed(0)
data = [torch.randint(0, vocab, (batch, context + 1), generator=g) for _ in range(4)]


def step(i):
    seq = data[i % len(data)]
    loss = F.cross_entropy(model(seq[:, :-1]).reshape(-1, vocab), seq[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


for i in range(3):  # warm-up
    step(i)
t0 = time.perf_counter()
for i in range(steps):
    step(i)
elapsed = time.perf_counter() - t0
print(json.dumps({"tokens_per_s": steps * batch * context / elapsed, "seconds": elapsed}))
