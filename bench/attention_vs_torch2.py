"""sinklab's JIT attention against what a researcher on torch 2.x would use
instead: FlexAttention (torch.nn.attention.flex_attention under
torch.compile, its intended use) for every paper variant its score_mod and
mask_mod express, and F.scaled_dot_product_attention: for plain causal
softmax with is_causal, for the other variants with the mask and bias as a
dense attn_mask (FlexAttention has no backward on the CPU in torch 2.11, so
SDPA with a mask is what trains them there). Forward alone (no grad) and
forward + backward, at the shapes of bench/attention_speed.cpp (batch 16 x 4
heads, float32, on the CPU).

The JIT's side is `attention_speed case`, run as a child process once per
round and shape right before the torch side is timed in this process, so
that a change in the machine's load hits both; each ratio (torch time / JIT
time: above 1 means sinklab is faster) is the median of the rounds' ratios.

usage: $(scripts/torch-venv.sh)/bin/python bench/attention_vs_torch2.py [--binary build/bench/attention_speed]
           [--threads 1] [--rounds 3] [--repeats 5] [--variants softmax,window,...] [--shapes 64:16,128:32,...]
           [--json FILE]

Not expressible in FlexAttention, so not compared: scores other than
exp(qk) under a sum (sigmoid, elu + 1, identity; Z = 1, |sum|, p-norms),
softpick, the k* column of K biases (an extra key every query sees, with
its own value) and the MLP/elu1 kernels (those are LibTorch code around the
attention in sinklab too).
"""
import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # idle threads yield to the JIT's child process
import torch2_env  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask, flex_attention  # noqa: E402

B, H = 16, 4
WINDOW, PREFIX, ALPHA = 32, 16, 0.2  # as attention_speed.cpp's variants


def causal(b, h, q, kv):
    return kv <= q


def window(b, h, q, kv):
    return (kv <= q) & (q - kv < WINDOW)


def prefix(b, h, q, kv):
    # sinklab's prefix block is bidirectional; later queries see it causally anyway
    return (kv <= q) | (kv < PREFIX)


def relative_bucket(n, buckets=32, max_distance=128):  # as runtime/training/model.cpp
    import math
    exact = max(1, buckets // 2)
    if n < exact:
        return n
    scaled = math.log(n / exact) / math.log(max(max_distance / exact, 1 + 1e-9))
    return min(buckets - 1, exact + int(scaled * (buckets - exact)))


def variant(key, T):
    """(mask_mod, score_mod or None, output scale, the dense bias function, tensors that take a gradient)."""
    i = torch.arange(T)
    distance = (i[:, None] - i[None]).abs()

    def dense(mask_mod, bias=None):
        # SDPA's attn_mask: the bias where allowed, -inf elsewhere; rebuilt each call when the bias is learned
        allowed = mask_mod(None, None, i[:, None], i[None])
        blocked = torch.zeros(T, T).masked_fill(~allowed, float("-inf"))
        return (lambda: blocked) if bias is None else (lambda: bias() + blocked)

    if key in ("softmax", "scale"):  # scale: rows sum to alpha, the softmax's output times alpha
        return causal, None, ALPHA if key == "scale" else 1.0, None, []
    if key == "window":
        return window, None, 1.0, dense(window), []
    if key == "prefix":
        return prefix, None, 1.0, dense(prefix), []
    if key == "alibi":
        slopes = torch.pow(2.0, -8.0 * torch.arange(1, H + 1, dtype=torch.float32) / H)
        fixed = -slopes[:, None, None] * distance
        return causal, lambda s, b, h, q, kv: s + slopes[h] * (kv - q), 1.0, dense(causal, lambda: fixed), []
    if key == "t5":  # a learned bias per head and bucket of the distance, read out as a [H, T] table
        table = torch.randn(32, H)[torch.tensor([relative_bucket(n) for n in range(T)])].t().contiguous()
        table.requires_grad_(True)
        score_mod = lambda s, b, h, q, kv: s + table[h, (q - kv).abs()]  # noqa: E731
        return causal, score_mod, 1.0, dense(causal, lambda: table[:, distance]), [table]
    raise ValueError(key)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def timed(f, repeats):
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return median(times) * 1e3


def jit_times(binary, threads, repeats, key, T, dh):
    out = subprocess.run([binary, "case", str(threads), str(repeats), key, f"{T}:{dh}"], check=True,
                         capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["fwd_ms"], j["fwd_bwd_ms"]


def measure(args, key, T, dh):
    torch.manual_seed(0)
    mask_mod, score_mod, scale, bias, extra = variant(key, T)
    block_mask = create_block_mask(mask_mod, None, None, T, T, device="cpu")

    def attend(q, k, v):
        o = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
        return o * scale if scale != 1.0 else o

    def sdpa(q, k, v):
        if bias is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias())
        return o * scale if scale != 1.0 else o

    flex = torch.compile(attend, dynamic=False)
    q, k, v = (torch.randn(B, H, T, dh, requires_grad=True) for _ in range(3))
    # FlexAttention refuses inputs that require grad on the CPU (no backward there in torch 2.11)
    fq, fk, fv = (t.detach() for t in (q, k, v))
    dout = torch.randn(B, H, T, dh)

    def fwd(f, args):
        def run():
            with torch.no_grad():
                f(*args)
        return run

    def fwd_bwd(f):
        def run():
            f(q, k, v).backward(dout)
            for t in [q, k, v] + extra:
                t.grad = None
        return run

    row = {"variant": key, "T": T, "dh": dh}
    t0 = time.perf_counter()
    fwd(flex, (fq, fk, fv))()
    row["flex_compile_s"] = time.perf_counter() - t0
    try:
        fwd_bwd(flex)()
    except NotImplementedError as e:
        row["flex_bwd_error"] = str(e).splitlines()[0][:200]
    timings = {"flex_fwd": fwd(flex, (fq, fk, fv)), "sdpa_fwd": fwd(sdpa, (q, k, v)), "sdpa_fwd_bwd": fwd_bwd(sdpa)}
    if "flex_bwd_error" not in row:
        timings["flex_fwd_bwd"] = fwd_bwd(flex)
    rounds = {}
    for _ in range(args.rounds):
        jit = dict(zip(("fwd", "fwd_bwd"), jit_times(args.binary, args.threads, args.repeats, key, T, dh)))
        rounds.setdefault("jit_fwd", []).append(jit["fwd"])
        rounds.setdefault("jit_fwd_bwd", []).append(jit["fwd_bwd"])
        for name, f in timings.items():
            ms = timed(f, args.repeats)
            rounds.setdefault(name, []).append(ms)
            rounds.setdefault(name + "_over_jit", []).append(ms / jit[name.split("_", 1)[1]])
    row.update({name: median(values) for name, values in rounds.items()})
    return row


def cell(row, key, fmt):
    return fmt.format(row[key]) if key in row else "-"


def main():
    p = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--binary", default=os.path.join(here, "..", "build", "bench", "attention_speed"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--variants", default="softmax,window,prefix,alibi,t5,scale")
    p.add_argument("--shapes", default="64:16,128:32,256:32,512:64")
    p.add_argument("--json")
    args = p.parse_args()
    torch2_env.fix_inductor(args.threads)
    torch.set_num_threads(args.threads)
    torch._dynamo.config.cache_size_limit = 1024  # one compile per variant and shape, all kept
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 1024
    print(f"torch {torch.__version__}, {args.threads} thread(s), batch {B} x {H} heads, float32; "
          f"median of {args.rounds} rounds of {args.repeats} repeats; ratio = torch ms / sinklab JIT ms")
    print(f"{'variant':<8} {'T':>4} {'dh':>3} | {'jit fwd':>8} {'flex fwd':>8} {'ratio':>6} {'sdpa fwd':>8} "
          f"{'ratio':>6} | {'jit f+b':>8} {'flex f+b':>8} {'ratio':>6} {'sdpa f+b':>8} {'ratio':>6}", flush=True)
    rows, flex_bwd_error = [], None
    for key in args.variants.split(","):
        for shape in args.shapes.split(","):
            T, dh = map(int, shape.split(":"))
            r = measure(args, key, T, dh)
            rows.append(r)
            flex_bwd_error = r.get("flex_bwd_error", flex_bwd_error)
            names = ("flex_fwd", "sdpa_fwd", "flex_fwd_bwd", "sdpa_fwd_bwd")
            ms = [cell(r, name, "{:.2f}") for name in names]
            x = [cell(r, name + "_over_jit", "{:.2f}x") for name in names]
            print(f"{key:<8} {T:>4} {dh:>3} | {r['jit_fwd']:>8.2f} {ms[0]:>8} {x[0]:>6} {ms[1]:>8} {x[1]:>6} | "
                  f"{r['jit_fwd_bwd']:>8.2f} {ms[2]:>8} {x[2]:>6} {ms[3]:>8} {x[3]:>6}", flush=True)
    if flex_bwd_error:
        print(f"flex f+b: none on the CPU in torch {torch.__version__} ({flex_bwd_error})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": args.threads, "load": os.getloadavg(), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
