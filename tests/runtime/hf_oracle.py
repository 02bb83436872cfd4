#!/usr/bin/env python3
"""Tiny random Hugging Face checkpoints and their sink metrics, computed by a
forward pass written here, independently of sinklab's C++ reader.

    hf_oracle.py OUT_DIR       one folder per case: config.json, *.safetensors,
                               ids.txt (N lines of T ids), expected.json
    hf_oracle.py --from-llama2c MODEL.bin OUT_DIR
                               the llama2.c checkpoint in Hugging Face's LLaMA
                               layout (rotary halves permuted as its converter does)

Needs only Debian's python3-torch (and numpy, which it depends on): the
safetensors files are written by hand from the format's specification.
"""
import json
import math
import os
import struct
import sys

import torch

N, T, EPS = 3, 16, 0.3

DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits are those of an int16
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def save(folder, config, tensors, dtype, shards=1):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    stored = {k: v.to(dtype) for k, v in tensors.items()}
    names = sorted(stored)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), stored)
    else:
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: stored[n] for n in names[s::shards]}
            write_safetensors(os.path.join(folder, file), part)
            weight_map.update({n: file for n in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    # The forward sees exactly the stored (rounded) weights.
    return {k: v.to(torch.float32) for k, v in stored.items()}


# ---- the forward passes ------------------------------------------------------

def causal_softmax(q, k, window=0):
    """q [N,H,T,dh], k [N,H,T,dh] -> probabilities [N,H,T,T]."""
    t = q.shape[2]
    scores = q @ k.transpose(2, 3) / math.sqrt(q.shape[-1])
    i = torch.arange(t).view(t, 1)
    j = torch.arange(t).view(1, t)
    visible = j <= i
    if window:
        visible = visible & (i - j < window)
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)


def heads(x, h):
    n, t, _ = x.shape
    return x.view(n, t, h, -1).permute(0, 2, 1, 3)


def merge(x):
    n, h, t, dh = x.shape
    return x.permute(0, 2, 1, 3).reshape(n, t, h * dh)


def rope_half(x, dims, theta):
    """Hugging Face's rotate-half RoPE on the first `dims` channels of each head."""
    t = x.shape[2]
    inv = 1.0 / theta ** (torch.arange(0, dims, 2).float() / dims)
    ang = torch.arange(t).float()[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    r, rest = x[..., :dims], x[..., dims:]
    first, second = r[..., : dims // 2], r[..., dims // 2:]
    turned = r * ang.cos() + torch.cat([-second, first], dim=-1) * ang.sin()
    return torch.cat([turned, rest], dim=-1)


def ln(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def forward_llama(c, w, ids):
    h = w["model.embed_tokens.weight"][ids]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    dh = c["hidden_size"] // nh
    window = c.get("sliding_window") or 0 if c["model_type"] == "mistral" else 0
    out = []
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        x = h / torch.sqrt((h * h).mean(-1, keepdim=True) + c["rms_norm_eps"]) * w[p + "input_layernorm.weight"]
        proj = {}
        for name in "qkv":
            y = x @ w[p + f"self_attn.{name}_proj.weight"].T
            if p + f"self_attn.{name}_proj.bias" in w:
                y = y + w[p + f"self_attn.{name}_proj.bias"]
            proj[name] = heads(y, nh if name == "q" else nkv)
        q = rope_half(proj["q"], dh, c["rope_theta"])
        k = rope_half(proj["k"], dh, c["rope_theta"]).repeat_interleave(nh // nkv, dim=1)
        v = proj["v"].repeat_interleave(nh // nkv, dim=1)
        a = causal_softmax(q, k, window)
        h = h + merge(a @ v) @ w[p + "self_attn.o_proj.weight"].T
        x = h / torch.sqrt((h * h).mean(-1, keepdim=True) + c["rms_norm_eps"]) * w[p + "post_attention_layernorm.weight"]
        g = x @ w[p + "mlp.gate_proj.weight"].T
        h = h + ((g * torch.sigmoid(g)) * (x @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        out.append((a, h))
    return out


def forward_gpt2(c, w, ids):
    t = ids.shape[1]
    h = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:t]
    e = c["layer_norm_epsilon"]
    out = []
    for l in range(c["n_layer"]):
        p = f"transformer.h.{l}."
        x = ln(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"], e)
        qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        d = c["n_embd"]
        q, k, v = (heads(qkv[..., i * d:(i + 1) * d], c["n_head"]) for i in range(3))
        a = causal_softmax(q, k)
        h = h + merge(a @ v) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        x = ln(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"], e)
        m = gelu_tanh(x @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        out.append((a, h))
    return out


def forward_neox(c, w, ids):
    h = w["gpt_neox.embed_in.weight"][ids]
    nh = c["num_attention_heads"]
    dh = c["hidden_size"] // nh
    rot = int(dh * c["rotary_pct"])
    e = c["layer_norm_eps"]
    out = []
    for l in range(c["num_hidden_layers"]):
        p = f"gpt_neox.layers.{l}."
        lin = lambda x, name: x @ w[p + name + ".weight"].T + w[p + name + ".bias"]
        x = ln(h, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], e)
        qkv = lin(x, "attention.query_key_value")
        n, t, _ = qkv.shape
        qkv = qkv.view(n, t, nh, 3, dh).permute(3, 0, 2, 1, 4)  # per head: q, k, v
        q = rope_half(qkv[0], rot, c["rotary_emb_base"])
        k = rope_half(qkv[1], rot, c["rotary_emb_base"])
        a = causal_softmax(q, k)
        attn = lin(merge(a @ qkv[2]), "attention.dense")
        mlp = lambda y: lin(gelu_erf(lin(y, "mlp.dense_h_to_4h")), "mlp.dense_4h_to_h")
        post = lambda y: ln(y, w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"], e)
        if c["use_parallel_residual"]:
            h = h + attn + mlp(post(h))
        else:
            h = h + attn
            h = h + mlp(post(h))
        out.append((a, h))
    return out


def forward_opt(c, w, ids):
    t = ids.shape[1]
    x = w["model.decoder.embed_tokens.weight"][ids]
    if "model.decoder.project_in.weight" in w:
        x = x @ w["model.decoder.project_in.weight"].T
    h = x + w["model.decoder.embed_positions.weight"][2:2 + t]
    before = c["do_layer_norm_before"]
    out = []
    for l in range(c["num_hidden_layers"]):
        p = f"model.decoder.layers.{l}."
        lin = lambda y, name: y @ w[p + name + ".weight"].T + w[p + name + ".bias"]
        norm = lambda y, name: ln(y, w[p + name + ".weight"], w[p + name + ".bias"], 1e-5)
        x = norm(h, "self_attn_layer_norm") if before else h
        q, k, v = (heads(lin(x, f"self_attn.{n}_proj"), c["num_attention_heads"]) for n in "qkv")
        a = causal_softmax(q, k)
        h = h + lin(merge(a @ v), "self_attn.out_proj")
        if not before:
            h = norm(h, "self_attn_layer_norm")
        x = norm(h, "final_layer_norm") if before else h
        h = h + lin(torch.relu(lin(x, "fc1")), "fc2")
        if not before:
            h = norm(h, "final_layer_norm")
        out.append((a, h))
    return out


FORWARD = {"llama": forward_llama, "mistral": forward_llama, "qwen2": forward_llama, "gpt2": forward_gpt2,
           "gpt_neox": forward_neox, "opt": forward_opt}


def metrics(layers, window):
    """alpha_1 per layer and head (mean over sequences of the mean attention the
    first token gets from the queries that see it: all of them, or the first
    `window` under a sliding window), Sink_1^EPS in %, massive ratios."""
    alpha, over, total, massive = [], 0, 0, []
    for a, h in layers:
        seeing = min(window, a.shape[2]) if window else a.shape[2]
        a1 = a[..., :seeing, 0].mean(-1)  # [N, H]
        alpha.append(a1.mean(0).tolist())
        over += int((a1 > EPS).sum())
        total += a1.numel()
        norms = h.double().norm(dim=-1)
        massive.append(float((norms[:, 0] / norms[:, 1:].mean(-1)).mean()))
    return {"alpha": alpha, "sink": {"1": 100.0 * over / total}, "massive": massive}


# ---- the cases ---------------------------------------------------------------

def rand(*shape, scale=0.3):
    return torch.randn(*shape) * scale


def llama_case(model_type, d=32, layers=2, nh=4, nkv=2, ffn=48, vocab=61, biases=False, window=None):
    dh = d // nh
    c = {"model_type": model_type, "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": nh,
         "num_key_value_heads": nkv, "intermediate_size": ffn, "vocab_size": vocab, "rms_norm_eps": 1e-5,
         "rope_theta": 500.0, "hidden_act": "silu", "bos_token_id": 1, "rope_scaling": None}
    if window:
        c["sliding_window"] = window
    w = {"model.embed_tokens.weight": rand(vocab, d, scale=1.0), "model.norm.weight": 1 + rand(d, scale=0.1)}
    for l in range(layers):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rand(d, scale=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + rand(d, scale=0.1)
        for name, rows in (("q", nh * dh), ("k", nkv * dh), ("v", nkv * dh)):
            w[p + f"self_attn.{name}_proj.weight"] = rand(rows, d)
            if biases:
                w[p + f"self_attn.{name}_proj.bias"] = rand(rows)
        w[p + "self_attn.o_proj.weight"] = rand(d, nh * dh)
        w[p + "mlp.gate_proj.weight"] = rand(ffn, d)
        w[p + "mlp.up_proj.weight"] = rand(ffn, d)
        w[p + "mlp.down_proj.weight"] = rand(d, ffn)
    return c, w


def gpt2_case(d=32, layers=2, nh=4, vocab=57):
    c = {"model_type": "gpt2", "n_embd": d, "n_layer": layers, "n_head": nh, "n_positions": 64, "vocab_size": vocab,
         "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "bos_token_id": 0}
    w = {"transformer.wte.weight": rand(vocab, d, scale=1.0), "transformer.wpe.weight": rand(64, d, scale=0.5),
         "transformer.ln_f.weight": 1 + rand(d, scale=0.1), "transformer.ln_f.bias": rand(d, scale=0.1)}
    for l in range(layers):
        p = f"transformer.h.{l}."
        for n in ("ln_1", "ln_2"):
            w[p + n + ".weight"] = 1 + rand(d, scale=0.1)
            w[p + n + ".bias"] = rand(d, scale=0.1)
        for n, i, o in (("attn.c_attn", d, 3 * d), ("attn.c_proj", d, d), ("mlp.c_fc", d, 4 * d), ("mlp.c_proj", 4 * d, d)):
            w[p + n + ".weight"] = rand(i, o)  # Conv1D: [in, out]
            w[p + n + ".bias"] = rand(o, scale=0.1)
    return c, w


def neox_case(parallel, pct, d=32, layers=2, nh=2, vocab=50):
    c = {"model_type": "gpt_neox", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": nh,
         "intermediate_size": 4 * d, "vocab_size": vocab, "layer_norm_eps": 1e-5, "rotary_pct": pct,
         "rotary_emb_base": 10000, "use_parallel_residual": parallel, "hidden_act": "gelu", "bos_token_id": 0}
    w = {"gpt_neox.embed_in.weight": rand(vocab, d, scale=1.0)}
    for l in range(layers):
        p = f"gpt_neox.layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[p + n + ".weight"] = 1 + rand(d, scale=0.1)
            w[p + n + ".bias"] = rand(d, scale=0.1)
        for n, i, o in (("attention.query_key_value", d, 3 * d), ("attention.dense", d, d),
                        ("mlp.dense_h_to_4h", d, 4 * d), ("mlp.dense_4h_to_h", 4 * d, d)):
            w[p + n + ".weight"] = rand(o, i)
            w[p + n + ".bias"] = rand(o, scale=0.1)
    return c, w


def opt_case(before, proj=None, d=32, layers=2, nh=4, vocab=53):
    e = proj or d
    c = {"model_type": "opt", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": nh,
         "ffn_dim": 2 * d, "vocab_size": vocab, "do_layer_norm_before": before, "word_embed_proj_dim": e,
         "max_position_embeddings": 64, "activation_function": "relu", "bos_token_id": 2}
    w = {"model.decoder.embed_tokens.weight": rand(vocab, e, scale=1.0),
         "model.decoder.embed_positions.weight": rand(66, d, scale=0.5)}
    if proj:
        w["model.decoder.project_in.weight"] = rand(d, e)
        w["model.decoder.project_out.weight"] = rand(e, d)
    for l in range(layers):
        p = f"model.decoder.layers.{l}."
        for n in ("self_attn_layer_norm", "final_layer_norm"):
            w[p + n + ".weight"] = 1 + rand(d, scale=0.1)
            w[p + n + ".bias"] = rand(d, scale=0.1)
        for n, i, o in (("self_attn.q_proj", d, d), ("self_attn.k_proj", d, d), ("self_attn.v_proj", d, d),
                        ("self_attn.out_proj", d, d), ("fc1", d, 2 * d), ("fc2", 2 * d, d)):
            w[p + n + ".weight"] = rand(o, i)
            w[p + n + ".bias"] = rand(o, scale=0.1)
    return c, w


CASES = {
    "llama_gqa": (lambda: llama_case("llama"), torch.float32, 1),
    "qwen2_biases_bf16_sharded": (lambda: llama_case("qwen2", biases=True), torch.bfloat16, 3),
    "mistral_window": (lambda: llama_case("mistral", nkv=1, window=5), torch.float16, 1),
    "gpt2": (gpt2_case, torch.float32, 1),
    "gpt2_fp16": (gpt2_case, torch.float16, 2),
    "pythia_parallel": (lambda: neox_case(True, 0.25), torch.float32, 1),
    "neox_serial_half_rotary": (lambda: neox_case(False, 0.5), torch.bfloat16, 1),
    "opt_pre_norm": (lambda: opt_case(True), torch.float32, 1),
    "opt_post_norm_projected": (lambda: opt_case(False, proj=16), torch.float16, 1),
}


def write_cases(out):
    for k, (name, (make, dtype, shards)) in enumerate(sorted(CASES.items())):
        torch.manual_seed(100 + k)
        config, weights = make()
        folder = os.path.join(out, name)
        stored = save(folder, config, weights, dtype, shards)
        ids = torch.randint(0, config["vocab_size"], (N, T))
        with open(os.path.join(folder, "ids.txt"), "w") as f:
            for row in ids.tolist():
                f.write(" ".join(map(str, row)) + "\n")
        with torch.no_grad():
            expected = metrics(FORWARD[config["model_type"]](config, stored, ids), config.get("sliding_window", 0))
        expected.update({"N": N, "T": T, "eps": EPS})
        with open(os.path.join(folder, "expected.json"), "w") as f:
            json.dump(expected, f)
        print(folder)


def from_llama2c(path, out):
    with open(path, "rb") as f:
        dim, hidden, layers, nh, nkv, vocab, seq_len = struct.unpack("<7i", f.read(28))
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    shared = vocab > 0
    vocab = abs(vocab)
    dh = dim // nh
    at = 0

    def take(*shape):
        nonlocal at
        n = math.prod(shape)
        t = data[at:at + n].view(*shape).clone()
        at += n
        return t

    def to_half_split(wt, n_heads):
        # llama.c rotates interleaved pairs (2i, 2i+1); Hugging Face pairs i with i + dh/2.
        return wt.view(n_heads, dh // 2, 2, dim).transpose(1, 2).reshape(n_heads * dh, dim)

    emb = take(vocab, dim)
    rms_att, wq = take(layers, dim), take(layers, nh * dh, dim)
    wk, wv = take(layers, nkv * dh, dim), take(layers, nkv * dh, dim)
    wo, rms_ffn = take(layers, dim, nh * dh), take(layers, dim)
    w1, w2, w3 = take(layers, hidden, dim), take(layers, dim, hidden), take(layers, hidden, dim)
    rms_final = take(dim)
    w = {"model.embed_tokens.weight": emb, "model.norm.weight": rms_final}
    for l in range(layers):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = rms_att[l]
        w[p + "post_attention_layernorm.weight"] = rms_ffn[l]
        w[p + "self_attn.q_proj.weight"] = to_half_split(wq[l], nh)
        w[p + "self_attn.k_proj.weight"] = to_half_split(wk[l], nkv)
        w[p + "self_attn.v_proj.weight"] = wv[l]
        w[p + "self_attn.o_proj.weight"] = wo[l]
        w[p + "mlp.gate_proj.weight"] = w1[l]
        w[p + "mlp.down_proj.weight"] = w2[l]
        w[p + "mlp.up_proj.weight"] = w3[l]
    config = {"model_type": "llama", "hidden_size": dim, "intermediate_size": hidden, "num_hidden_layers": layers,
              "num_attention_heads": nh, "num_key_value_heads": nkv, "vocab_size": vocab, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "max_position_embeddings": seq_len, "bos_token_id": 1, "hidden_act": "silu",
              "tie_word_embeddings": shared}
    save(out, config, w, torch.float32)
    print(out)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--from-llama2c":
        from_llama2c(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2:
        write_cases(sys.argv[1])
    else:
        sys.exit(__doc__)
