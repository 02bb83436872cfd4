"""What a researcher would run instead of sinklab's generated attention, timed on the same GPU right after
bench/gpu_attention: FlexAttention (torch.compile(flex_attention) with a block mask) for the softmax family
it expresses, the k* column and the sink logit through the log-sum-exp it returns; SDPA for plain causal
softmax (timed by gpu_attention in LibTorch); torch.compile of the same attention written as PyTorch ops
(the composite) for every variant. Forward + backward in bf16 at gpu_attention's shapes; prints ours and the
baselines side by side, in TFLOP/s of both counts (gpu_attention.cpp explains them).

    python3 bench/gpu_attention_baselines.py OURS.json [--repeats 10] [--budget SECONDS] [--json OUT.json]
    python3 bench/gpu_attention_baselines.py --check     (no GPU needed: the composites against FlexAttention
                                                          and each other, float32 on the CPU, forward only)

OURS.json is what `gpu_attention --json` wrote. A case the budget leaves no time for is marked so.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:  # torch < 2.5
    flex_attention = None
try:
    from torch.nn.attention.flex_attention import AuxRequest  # torch >= 2.9: return_lse is deprecated
except ImportError:
    AuxRequest = None


def flex_with_lse(q, k, v, score_mod, block_mask):
    if AuxRequest is not None:
        out, aux = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, return_aux=AuxRequest(lse=True))
        return out, aux.lse
    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, return_lse=True)


def visible(case, T, device):
    """[T, T] bool: query i sees key j (causal; a prefix seen both ways; a window)."""
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None]
    hi = torch.clamp(i, min=case["prefix"] - 1) if case["prefix"] > 0 else i
    seen = j <= hi
    if case["window"] > 0:
        seen &= j > i - case["window"]
    return seen


def mask_mod_of(case):
    prefix, window = case["prefix"], case["window"]

    def mask_mod(b, h, q, kv):
        hi = torch.maximum(q, torch.full_like(q, prefix - 1)) if prefix > 0 else q
        seen = kv <= hi
        if window > 0:
            seen = seen & (kv > q - window)
        return seen

    return mask_mod


def composite(case, q, k, v, g, k_star, v_star, sink):
    """The variant as PyTorch ops over the dense [T, T] scores, what torch.compile is handed."""
    T, D = q.shape[-2], q.shape[-1]
    x = (q @ k.transpose(-1, -2)).float() / math.sqrt(D)
    if g is not None:
        i = torch.arange(T, device=q.device)
        x = x + g[:, (i[:, None] - i[None]).abs()]
    seen = visible(case, T, q.device)
    extra = []  # columns every query sees: (logit, value or None)
    if k_star is not None:
        extra.append(((q.float() @ k_star[:, :, None]).squeeze(-1)[..., None] / math.sqrt(D), v_star))
    if sink is not None:
        extra.append((sink[None, :, None, None].expand(*x.shape[:-1], 1), None))
    cols = torch.cat([x] + [e[0] for e in extra], -1)
    seen_cols = torch.cat([seen] + [torch.ones(T, 1, dtype=torch.bool, device=q.device)] * len(extra), -1)
    score, norm = case["score"], case["normalize"]
    if score == "exp" and norm in ("sum", "pnorm", "softpick"):
        m = cols.masked_fill(~seen_cols, -math.inf).amax(-1, keepdim=True)
        if norm == "softpick":
            m = m.clamp(min=0)
            u = torch.where(seen_cols, torch.exp(cols - m) - torch.exp(-m), 0)
            A = u.clamp(min=0) / (u.abs().sum(-1, keepdim=True) + 1e-8 * torch.exp(-m))
        else:
            s = torch.where(seen_cols, torch.exp(cols - m), 0)
            p = case["p"] if norm == "pnorm" else 1
            A = s / (s.pow(p).sum(-1, keepdim=True).pow(1 / p) if p != 1 else s.sum(-1, keepdim=True))
    else:
        if score == "sigmoid":
            s = torch.sigmoid(cols)
        elif score == "elu1":
            s = F.elu(cols) + 1
        elif score == "relu":
            s = F.relu(cols)
        elif score == "stablemax":
            s = torch.where(cols >= 0, cols + 1, 1 / (1 - cols.clamp(max=0)))
        elif score == "expr":  # the case's own PyTorch expression of the logit x (gpu_attention_cases.h)
            s = eval(case["torch_score"], {"torch": torch, "F": F, "x": cols})
        else:
            raise ValueError(score)
        s = torch.where(seen_cols, s, 0)
        if norm == "none":
            A = s
        elif norm == "sum":
            A = s / s.sum(-1, keepdim=True)
        elif norm == "count":
            A = s / seen_cols.sum(-1, keepdim=True)
        else:
            raise ValueError(norm)
    out = A[..., :T].to(v.dtype) @ v
    for n, (_, value) in enumerate(extra):
        if value is not None:
            out = out + A[..., T + n, None].to(v.dtype) * value[None, :, None, :].to(v.dtype)
    return out


def flex_expresses(case):
    return flex_attention is not None and case["score"] == "exp" and case["normalize"] == "sum"


def flex(case, T, H, device):
    """FlexAttention with a block mask; k* and the sink logit as a correction through its log-sum-exp."""
    block_mask = create_block_mask(mask_mod_of(case), None, None, T, T, device=device)

    def attend(q, k, v, g, k_star, v_star, sink):
        score_mod = None
        if g is not None:
            def score_mod(s, b, h, qi, kv):
                return s + g[h, (qi - kv).abs()]
        if k_star is None and sink is None:
            return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
        out, lse = flex_with_lse(q, k, v, score_mod, block_mask)
        out = out.float()
        if k_star is not None:
            xs = (q.float() @ k_star[:, :, None]).squeeze(-1) / math.sqrt(q.shape[-1])
            out = out * torch.sigmoid(lse - xs)[..., None] + torch.sigmoid(xs - lse)[..., None] * v_star[None, :, None]
            lse = torch.logaddexp(lse, xs)
        if sink is not None:
            out = out * torch.sigmoid(lse - sink[None, :, None])[..., None]
        return out.to(q.dtype)

    return attend


def inputs(case, device, dtype, requires_grad=True):
    B, H, T, D = case["B"], case["H"], case["T"], case["D"]
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, device=device, dtype=dtype, requires_grad=requires_grad) for _ in range(3))
    g = torch.randn(H, T, device=device) * 0.1 if case["alibi"] else None  # ALiBi's: a constant, as trained
    k_star = torch.randn(H, D, device=device).requires_grad_(requires_grad) if case["k_star"] else None
    v_star = torch.zeros(H, D, device=device) if case["k_star"] else None
    sink = torch.zeros(H, device=device).requires_grad_(requires_grad) if case["sink_logit"] else None
    return q, k, v, g, k_star, v_star, sink


def timed_ms(f, repeats):
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def measure(case, repeats):
    """{baseline name: ms} for one case, forward + backward."""
    args = inputs(case, "cuda", torch.bfloat16)
    dout = torch.randn_like(args[0])

    def fwd_bwd(attend):
        def run():
            attend(*args).backward(dout)
            for t in args:
                if t is not None:
                    t.grad = None
        return run

    out = {}
    candidates = {"torch.compile composite": lambda: torch.compile(lambda *a: composite(case, *a), dynamic=False)}
    if flex_expresses(case):
        candidates["FlexAttention"] = lambda: torch.compile(flex(case, case["T"], case["H"], "cuda"), dynamic=False)
    for name, make in candidates.items():
        try:
            out[name] = timed_ms(fwd_bwd(make()), repeats)
        except Exception as e:  # a baseline that cannot run this case says why, the sweep goes on
            out[name] = "error: " + str(e).splitlines()[0][:160]
        torch._dynamo.reset()
    return out


def check():
    """The composites agree with FlexAttention (and a sink logit of -inf with no sink), float32 on the CPU."""
    ok = True
    base = {"score": "exp", "normalize": "sum", "p": 1, "window": 0, "prefix": 0, "alibi": False, "k_star": False,
            "sink_logit": False, "B": 1, "H": 2, "T": 64, "D": 16}
    # (the last: a score written as an expression, exp's, through the unshifted path softmax's must agree with)
    for change in ({}, {"window": 9}, {"prefix": 5}, {"alibi": True}, {"k_star": True}, {"sink_logit": True},
                   {"score": "expr", "torch_score": "torch.exp(x)"}):
        case = dict(base, **change)
        q, k, v, g, ks, vs, sink = inputs(case, "cpu", torch.float32, requires_grad=False)
        if vs is not None:
            vs = torch.randn_like(vs)
        want = composite(case, q, k, v, g, ks, vs, sink)
        got = flex(case, case["T"], case["H"], "cpu")(q, k, v, g, ks, vs, sink)
        err = (got - want).abs().max().item()
        ok &= err < 1e-4
        print(f"{'ok  ' if err < 1e-4 else 'FAIL'} FlexAttention vs composite {change or 'softmax'}: {err:.2e}")
    return ok


def flops_per_s(flops, ms):
    return flops / (ms * 1e-3) / 1e12 if isinstance(ms, (int, float)) and ms > 0 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ours", nargs="?")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget", type=float, default=1e9, help="seconds for the whole sweep")
    parser.add_argument("--json")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        return 0 if check() else 1
    if not torch.cuda.is_available():
        print("gpu_attention_baselines: no CUDA device; nothing to measure")
        return 77
    ours = json.load(open(args.ours))
    started = time.time()
    rows = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; ours: {ours['torch']} LibTorch")
    header = f"{'variant':<28} {'D':>4} {'T':>5} | {'ours ms':>8} {'TF/s':>6} {'FA TF/s':>7} | " \
             f"{'baseline':<24} {'ms':>8} {'TF/s':>6} {'FA TF/s':>7} {'base/ours':>9}"
    print(header)
    for case in ours["cases"]:
        baselines = {}
        if case.get("sdpa_ms"):
            baselines["SDPA"] = case["sdpa_ms"]
        if time.time() - started < args.budget:
            baselines.update(measure(case, args.repeats))
        else:
            baselines["(budget spent)"] = "not measured"
        for name, ms in baselines.items():
            fast = isinstance(ms, (int, float))
            ratio = f"{ms / case['ours_ms']:>8.2f}x" if fast and case["ours_ms"] > 0 else "-"
            tf = flops_per_s(case["ours_flops"], ms)
            fa = flops_per_s(case["fa_flops"], ms)
            shown = f"{ms:>8.3f} {tf:>6.1f} {fa:>7.1f} {ratio:>9}" if fast else str(ms)
            print(f"{case['variant']:<28} {case['D']:>4} {case['T']:>5} | {case['ours_ms']:>8.3f} "
                  f"{flops_per_s(case['ours_flops'], case['ours_ms']) or 0:>6.1f} "
                  f"{flops_per_s(case['fa_flops'], case['ours_ms']) or 0:>7.1f} | {name:<24} {shown}")
            rows.append(dict(case, baseline=name, baseline_ms=ms if fast else None,
                             baseline_note=None if fast else ms))
        sys.stdout.flush()
    if args.json:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows},
                  open(args.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
