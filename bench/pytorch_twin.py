#!/usr/bin/python3
"""sinklab's default model (RoPE, RMSNorm, SwiGLU, pre-norm, causal softmax)
in plain PyTorch, for the throughput comparisons: on the CPU with Debian's
python3-torch (bench/train_throughput.cpp), on a GPU with the PyTorch there
(bench/gpu_train_vs_pytorch.sh). Same shapes, threads, optimizer, precision
and micro-batches as the run it is compared with; prints tokens/s as JSON.
Attention is F.scaled_dot_product_attention where this PyTorch has it
(>= 2.0), else the composite form. With --compile the model runs through
torch.compile (inductor; >= 2.0), as a researcher on torch 2.x would train
it; the warm-up steps include its compile.

As a researcher would plainly write it, and no slower: q, k and v from one
product, and AdamW's faster form on the device, fused (CUDA >= 2.0, CPU >= 2.4)
or foreach, timed on the model's own parameters before the measurement.

--trace=FILE: after the warm-up, 3 steps under torch.profiler, exported as a Chrome trace to FILE (which
`sinkc-runtime trace-table FILE --steps 3` sums as it sums a sinklab run's own trace).

usage: pytorch_twin.py [--compile] [--rounds=N] [--serve] [--trace=FILE]
                       D LAYERS HEADS FFN CONTEXT BATCH VOCAB STEPS THREADS
                       [DEVICE [PRECISION [MICRO_BATCH]]]
       (DEVICE cpu | cuda, PRECISION fp32 | bf16; N rounds of STEPS steps, the median round reported.
       --serve: after the warm-up print {"ready": ...}, then time one round of STEPS steps for each line read
       from stdin, printing its JSON line, until stdin ends: bench/gpu_train_vs_pytorch.sh interleaves
       rounds of sinklab, this eager twin and the compiled one without compiling again each round)
"""
import json
import math
import sys
import time

import torch2_env
import torch
import torch.nn as nn
import torch.nn.functional as F

flags = [a for a in sys.argv[1:] if a.startswith("--")]
argv = [sys.argv[0]] + [a for a in sys.argv[1:] if not a.startswith("--")]
compiled = "--compile" in flags
rounds = next((int(f.split("=")[1]) for f in flags if f.startswith("--rounds=")), 1)
serve = "--serve" in flags
trace = next((f.split("=", 1)[1] for f in flags if f.startswith("--trace=")), None)
d, layers, heads, ffn, context, batch, vocab, steps, threads = map(int, argv[1:10])
device = argv[10] if len(argv) > 10 else "cpu"
precision = argv[11] if len(argv) > 11 else "fp32"
micro = int(argv[12]) if len(argv) > 12 and int(argv[12]) > 0 else batch
sdpa = hasattr(F, "scaled_dot_product_attention")
torch.set_num_threads(threads)
if compiled:
    torch2_env.fix_inductor(threads)
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
        self.wqkv, self.wo = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.w1, self.w3 = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        h = self.n1(x)
        q, k, v = self.wqkv(h).view(B, T, 3, heads, dh).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if sdpa:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
            o = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.wo(o.transpose(1, 2).reshape(B, T, d))
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
        cos, sin = ang.cos().float().to(x.device), ang.sin().float().to(x.device)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        h = self.embed(x)
        for b in self.blocks:
            h = b(h, cos, sin, mask)
        return self.head(self.norm(h))


model = Model().to(device)
forward = torch.compile(model) if compiled else model


def wait():
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def adamw(form):
    return torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1, **{form: True})


def seconds_per_update(form):
    """The form's update on the model's parameters, 10 steps after 2 (parameters and state put back after)."""
    kept = {k: v.clone() for k, v in model.state_dict().items()}
    trial = adamw(form)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    for _ in range(2):
        trial.step()
    wait()
    t0 = time.perf_counter()
    for _ in range(10):
        trial.step()
    wait()
    seconds = time.perf_counter() - t0
    model.load_state_dict(kept)
    for p in model.parameters():
        p.grad = None
    return seconds


times = {}
for form in ("fused", "foreach"):
    try:
        times[form] = seconds_per_update(form)
    except (TypeError, RuntimeError):  # a fused kernel this PyTorch lacks for the device
        pass
optimizer = min(times, key=times.get) if times else "default"
opt = adamw(optimizer) if times else torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                                                        weight_decay=0.1)
g = torch.Generator().manual_seed(0)
data = [torch.randint(0, vocab, (batch, context + 1), generator=g).to(device) for _ in range(4)]


def step(i):
    seq = data[i % len(data)]
    opt.zero_grad()
    for at in range(0, batch, micro):
        part = seq[at:at + micro]
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = forward(part[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), part[:, 1:].reshape(-1)) * (part.shape[0] / batch)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def timed_round():
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    wait()
    return time.perf_counter() - t0


def peak_memory():
    return torch.cuda.max_memory_allocated() if device.startswith("cuda") else None


def report(times):
    elapsed = sorted(times)[len(times) // 2]
    print(json.dumps({"peak_memory_bytes": peak_memory(),
                      "tokens_per_s": steps * batch * context / elapsed, "seconds": elapsed, "device": device,
                      "precision": precision, "micro_batch": micro, "sdpa": sdpa, "compile": compiled,
                      "optimizer": optimizer, "rounds": [steps * batch * context / t for t in times],
                      "torch": torch.__version__}), flush=True)


for i in range(3):  # warm-up (and torch.compile's compilation)
    step(i)
wait()
if trace:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        for i in range(3):
            step(i)
        wait()
    profile.export_chrome_trace(trace)
if serve:
    print(json.dumps({"ready": True, "compile": compiled, "torch": torch.__version__}), flush=True)
    for _ in sys.stdin:
        report([timed_round()])
else:
    report([timed_round() for _ in range(rounds)])
