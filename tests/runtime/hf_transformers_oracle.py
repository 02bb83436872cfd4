#!/usr/bin/env python3
"""Tiny random checkpoints written by Hugging Face's transformers itself, and
the sink metrics of transformers' own forward pass on them: the oracle for
`sinkc measure DIR` (tests/runtime/hf_transformers_test.cpp).

    hf_transformers_oracle.py cases OUT_DIR [CASE...]
        one folder per case and dtype (fp32, bf16): save_pretrained's
        config.json + model.safetensors, ids.txt (N lines of T ids) and
        expected.json: alpha, sink, massive and max_activation from the
        model reloaded with from_pretrained in fp32 ("fp32") and, for bf16
        folders, also computed in bf16 as a bf16 user would ("bf16_compute")
    hf_transformers_oracle.py tokenizer DIR TEXT_FILE
        a byte-level BPE tokenizer trained here with the tokenizers library,
        saved as DIR/tokenizer.json; prints tokenizers' own ids for the
        file's text (no special tokens), one line
    hf_transformers_oracle.py logits DIR IDS_FILE OUT.safetensors [DIR IDS_FILE OUT ...]
        logits and attention of AutoModelForCausalLM.from_pretrained(DIR)
        (eager attention, fp32) on the ids: "logits" [N, T, V] and
        "attention.L" [N, H, T, T]
    hf_transformers_oracle.py costs DIR IDS_FILE WINDOW KEEPS BITS OUT.json
        what a sink costs, by transformers on DIR (eager, fp32) with N lines
        of T + 1 ids (inputs, then each row's last target): the mean
        cross-entropy in full ("full"), under an explicit 4D attention mask of
        WINDOW keys keeping K first tokens for each K of the comma list KEEPS
        ("windowed"), after numpy's fake quantization of every decoder
        layer's linear weights and inputs to b bits for each b of BITS
        ("quantized"); and numpy's excess kurtosis and max |value| of each
        layer's residual stream and attention output on the inputs

Attention comes from transformers (output_attentions=True with the eager
implementation); the residual stream after each decoder layer from forward
hooks on transformers' own layer modules.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

N, T, EPS = 3, 16, 0.3


def randomize(model, seed):
    """Weights far from transformers' init (std 0.02, which gives uniform
    attention and no sink to measure): gains near 1, everything else O(0.3)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name or "ln_" in name:
                p.copy_(1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
            elif "embed" in name or "wte" in name or "wpe" in name:
                p.copy_(noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            else:
                p.copy_(0.3 * noise)


def decoder_layers(model):
    base = model.base_model
    for path in ("layers", "h", "decoder.layers"):
        m = base
        try:
            for part in path.split("."):
                m = getattr(m, part)
            return list(m)
        except AttributeError:
            continue
    raise RuntimeError(f"no decoder layers in {type(model).__name__}")


def run(model, ids):
    """transformers' attention per layer and the residual stream after each layer."""
    hidden = []

    def keep(_module, _args, output):
        hidden.append((output[0] if isinstance(output, tuple) else output).detach().float())

    hooks = [layer.register_forward_hook(keep) for layer in decoder_layers(model)]
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return [a.float() for a in out.attentions], hidden, out.logits.float()


def metrics(attentions, hidden, window):
    """alpha_1 per layer and head (mean over sequences of the mean attention
    token 1 gets from the queries that see it), Sink_1^EPS in %, the
    massive-activation ratio and max |h| per layer: what sinkc measure reports."""
    t = attentions[0].shape[-1]
    i = torch.arange(t).view(t, 1)
    j = torch.arange(t).view(1, t)
    allowed = (j <= i) & ((i - j < window) if window else torch.ones(t, t, dtype=torch.bool))
    seen_by = allowed.double().sum(0)
    alpha, over, total, massive, max_activation = [], 0, 0, [], []
    for a, h in zip(attentions, hidden):
        a1 = (a.double() * allowed).sum(2)[..., 0] / seen_by[0]  # [N, H]
        alpha.append(a1.mean(0).tolist())
        over += int((a1 > EPS).sum())
        total += a1.numel()
        norms = h.double().norm(dim=-1)
        massive.append(float((norms[:, 0] / norms[:, 1:].mean(-1)).mean()))
        max_activation.append(float(h.abs().max()))
    return {"alpha": alpha, "sink": {"1": 100.0 * over / total}, "massive": massive, "max_activation": max_activation}


def rope(theta, **extra):
    return {"rope_parameters": {"rope_type": "default", "rope_theta": theta, **extra}}


def cases():
    c = transformers
    llama = dict(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, rms_norm_eps=1e-5, bos_token_id=1, max_position_embeddings=64)
    return {
        "llama_gqa": c.LlamaConfig(**llama, **rope(500.0)),
        "mistral_window": c.MistralConfig(**{**llama, "num_key_value_heads": 1}, sliding_window=5, **rope(10000.0)),
        "qwen2_biases": c.Qwen2Config(**llama, **rope(1000.0)),
        # Room for the 300 tokens of the tokenizer test's tokenizer.json.
        "gpt2": c.GPT2Config(vocab_size=320, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0),
        "neox_parallel_quarter_rotary": c.GPTNeoXConfig(
            vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
            use_parallel_residual=True, bos_token_id=0, max_position_embeddings=64,
            **rope(10000.0, partial_rotary_factor=0.25)),
        "neox_serial_half_rotary": c.GPTNeoXConfig(
            vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
            use_parallel_residual=False, bos_token_id=0, max_position_embeddings=64,
            **rope(300.0, partial_rotary_factor=0.5)),
        "opt_pre_norm": c.OPTConfig(vocab_size=53, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                    ffn_dim=64, do_layer_norm_before=True, max_position_embeddings=64,
                                    bos_token_id=2),
        "opt_post_norm_projected": c.OPTConfig(vocab_size=53, hidden_size=32, num_hidden_layers=2,
                                               num_attention_heads=4, ffn_dim=64, do_layer_norm_before=False,
                                               word_embed_proj_dim=16, max_position_embeddings=64, bos_token_id=2),
    }


def load(folder, dtype):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager").eval()


def write_cases(out, only):
    for k, (name, config) in enumerate(sorted(cases().items())):
        if only and name not in only:
            continue
        torch.manual_seed(100 + k)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
        randomize(model, 100 + k)
        ids = torch.randint(0, config.vocab_size, (N, T))
        window = getattr(config, "sliding_window", None) or 0
        for dtype_name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            folder = os.path.join(out, f"{name}_{dtype_name}")
            model.to(dtype).save_pretrained(folder)
            with open(os.path.join(folder, "ids.txt"), "w") as f:
                for row in ids.tolist():
                    f.write(" ".join(map(str, row)) + "\n")
            # The stored weights, computed in fp32 as sinklab does.
            expected = {"fp32": metrics(*run(load(folder, torch.float32), ids)[:2], window)}
            if dtype == torch.bfloat16:
                expected["bf16_compute"] = metrics(*run(load(folder, torch.bfloat16), ids)[:2], window)
            expected.update({"N": N, "T": T, "eps": EPS, "transformers": transformers.__version__})
            with open(os.path.join(folder, "expected.json"), "w") as f:
                json.dump(expected, f)
            print(folder)


def write_tokenizer(folder, text_file):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["Once upon a time there was a little robot who loved attention sinks.",
              "The first token takes most of the attention in many heads."] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        special_tokens=["<|endoftext|>"], show_progress=False))
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(text_file, encoding="utf-8") as f:
        text = f.read()
    print(" ".join(map(str, tok.encode(text, add_special_tokens=False).ids)))


def write_logits(folder, ids_file, out):
    from safetensors.torch import save_file

    with open(ids_file) as f:
        ids = torch.tensor([[int(x) for x in line.split()] for line in f if line.strip()])
    attentions, _, logits = run(load(folder, torch.float32), ids)
    tensors = {"logits": logits.contiguous()}
    tensors.update({f"attention.{l}": a.contiguous() for l, a in enumerate(attentions)})
    save_file(tensors, out)


def fake_quantize(t, bits):
    """Per-tensor symmetric round-to-nearest in numpy float64: the scale max |t| / (2^(b-1) - 1)."""
    a = t.detach().double().numpy()
    levels = 2 ** (bits - 1) - 1
    scale = max(np.abs(a).max() / levels, 1e-30)
    return torch.from_numpy(np.clip(np.round(a / scale), -levels, levels) * scale).to(t.dtype)


def excess_kurtosis(t):
    """Population excess kurtosis of every value, two passes in numpy float64."""
    a = t.detach().double().numpy().ravel()
    d = a - a.mean()
    return float((d ** 4).mean() / (d ** 2).mean() ** 2 - 3)


def write_costs(folder, ids_file, window, keeps, bits, out):
    with open(ids_file) as f:
        ids = torch.tensor([[int(x) for x in line.split()] for line in f if line.strip()])
    x, y = ids[:, :-1], ids[:, 1:]
    n = x.shape[1]
    model = load(folder, torch.float32)

    def loss(mask=None):
        with torch.no_grad():
            logits = model(input_ids=x, attention_mask=mask, use_cache=False).logits
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y.reshape(-1)))

    i = torch.arange(n).view(n, 1)
    j = torch.arange(n).view(1, n)
    result = {"full": loss(), "windowed": {}, "quantized": {}}
    for kept in keeps:
        seen = (j <= i) & ((j > i - window) | (j < kept))
        mask = torch.zeros(n, n).masked_fill(~seen, torch.finfo(torch.float32).min)
        result["windowed"][str(kept)] = loss(mask.expand(x.shape[0], 1, n, n))

    layers = decoder_layers(model)
    residual, attention = [], []
    hooks = [layer.register_forward_hook(lambda _m, _a, o: residual.append(o[0] if isinstance(o, tuple) else o))
             for layer in layers]
    hooks += [layer.self_attn.register_forward_hook(lambda _m, _a, o: attention.append(o[0])) for layer in layers]
    with torch.no_grad():
        model(input_ids=x, use_cache=False)
    for h in hooks:
        h.remove()
    result["residual_kurtosis"] = [excess_kurtosis(h) for h in residual]
    result["residual_max"] = [float(h.abs().max()) for h in residual]
    result["attention_output_kurtosis"] = [excess_kurtosis(a) for a in attention]
    result["attention_output_max"] = [float(a.abs().max()) for a in attention]

    linears = [m for layer in layers for m in layer.modules() if isinstance(m, torch.nn.Linear)]
    stored = [m.weight.detach().clone() for m in linears]
    for b in bits:
        with torch.no_grad():
            for m, w in zip(linears, stored):
                m.weight.copy_(fake_quantize(w, b))
        hooks = [m.register_forward_pre_hook(lambda _m, args, b=b: (fake_quantize(args[0], b),) + args[1:])
                 for m in linears]
        result["quantized"][str(b)] = loss()
        for h in hooks:
            h.remove()
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "cases":
        write_cases(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "tokenizer":
        write_tokenizer(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and len(sys.argv) % 3 == 2 and sys.argv[1] == "logits":
        for at in range(2, len(sys.argv), 3):
            write_logits(*sys.argv[at:at + 3])
    elif len(sys.argv) == 8 and sys.argv[1] == "costs":
        write_costs(sys.argv[2], sys.argv[3], int(sys.argv[4]), [int(k) for k in sys.argv[5].split(",")],
                    [int(b) for b in sys.argv[6].split(",")], sys.argv[7])
    else:
        sys.exit(__doc__)
