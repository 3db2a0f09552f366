#!/usr/bin/env python3
"""Writes the tiny random checkpoints and the dequantisation fixture that runtime_test loads.

Outputs, under tests/models/fixtures/ (committed; rerun this script and `git diff` to check them):
  tiny-llama-hf/    config.json, model.safetensors (F16 embedding, F32 rest), tokenizer.json
  tiny-llama.gguf   the same weights as llama.cpp's converter writes them: Q and K rows permuted
                    per head for interleaved RoPE, token_embd F16, blk.0.ffn_down Q8_0
  tiny-qwen2-hf/    config.json, model.safetensors (BF16, Q/K/V biases, tied embeddings),
                    shards + model.safetensors.index.json
  tiny-qwen2.gguf   the same weights (F32; qwen2 is not permuted)
  tiny-reference.json  logits of each model on a fixed token sequence, computed here by a plain
                    numpy Llama/Qwen2 forward in float64 (numpy is the reference: transformers
                    needs torch, which this machine cannot install at a sensible size)
  quants.gguf       one tensor of each ggml type tlt reads, with random blocks
  quants-reference.json  those tensors as dequantised by the gguf package's own numpy code
                    (gguf.quants.dequantize), the outside reference for runtime/model/gguf_quant.cc

Needs numpy, gguf, safetensors (scripts/setup.sh installs them into ~/.cache/tlt/venv).
Usage: make_tiny_models.py [--out DIR]   (default: tests/models/fixtures)
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
if len(sys.argv) == 3 and sys.argv[1] == "--out":  # fixtures_current.sh: write elsewhere, compare
    OUT = sys.argv[2]
TOKENS = [1, 5, 9, 17, 33, 2, 40, 63, 0, 12, 7, 7, 50]


def tiny_config(arch):
    return dict(vocab=64, dim=32, layers=2, heads=4, kv_heads=2, ffn=64,
                rope_theta=10000.0 if arch == "llama" else 1000000.0, eps=1e-5,
                tied=(arch == "qwen2"), bias=(arch == "qwen2"))


def random_weights(c, rng):
    d = c["dim"] // c["heads"]
    w = {"model.embed_tokens.weight": rng.normal(0, 0.5, (c["vocab"], c["dim"])),
         "model.norm.weight": 1 + rng.normal(0, 0.1, c["dim"])}
    if not c["tied"]:
        w["lm_head.weight"] = rng.normal(0, 0.2, (c["vocab"], c["dim"]))
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, c["dim"])
        w[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, c["dim"])
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, 0.2, (c["heads"] * d, c["dim"]))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, 0.2, (c["kv_heads"] * d, c["dim"]))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 0.2, (c["kv_heads"] * d, c["dim"]))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.2, (c["dim"], c["heads"] * d))
        if c["bias"]:
            w[p + "self_attn.q_proj.bias"] = rng.normal(0, 0.3, c["heads"] * d)
            w[p + "self_attn.k_proj.bias"] = rng.normal(0, 0.3, c["kv_heads"] * d)
            w[p + "self_attn.v_proj.bias"] = rng.normal(0, 0.3, c["kv_heads"] * d)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.2, (c["ffn"], c["dim"]))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 0.2, (c["ffn"], c["dim"]))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 0.2, (c["dim"], c["ffn"]))
    return {k: v.astype(np.float32) for k, v in w.items()}


def bf16_round(x):
    """float32 -> the float32 value of its bfloat16 (round to nearest even), and the raw bits."""
    b = x.astype(np.float32).view(np.uint32)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return (rounded.astype(np.uint32) << 16).view(np.float32), rounded


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, theta):  # x (heads, T, D): rotate the two halves (Hugging Face's rotate_half)
    t, d = x.shape[1], x.shape[2]
    inv = theta ** (-np.arange(d // 2) / (d // 2))
    ang = np.outer(np.arange(t), inv)
    cos, sin = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def forward(c, w, tokens):
    """Logits (T, V) of a Llama/Qwen2 decoder in float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    d, h, hkv = c["dim"] // c["heads"], c["heads"], c["kv_heads"]
    x = w["model.embed_tokens.weight"][tokens]
    t = len(tokens)
    mask = np.triu(np.full((t, t), -np.inf), 1)
    for l in range(c["layers"]):
        p = f"model.layers.{l}."
        y = rms_norm(x, w[p + "input_layernorm.weight"], c["eps"])
        proj = {}
        for n in "qkv":
            proj[n] = y @ w[p + f"self_attn.{n}_proj.weight"].T
            if c["bias"]:
                proj[n] = proj[n] + w[p + f"self_attn.{n}_proj.bias"]
        q = rope(proj["q"].reshape(t, h, d).transpose(1, 0, 2), c["rope_theta"])
        k = rope(proj["k"].reshape(t, hkv, d).transpose(1, 0, 2), c["rope_theta"])
        v = proj["v"].reshape(t, hkv, d).transpose(1, 0, 2)
        k, v = np.repeat(k, h // hkv, 0), np.repeat(v, h // hkv, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        o = (s / s.sum(-1, keepdims=True)) @ v  # (H, T, D)
        x = x + o.transpose(1, 0, 2).reshape(t, h * d) @ w[p + "self_attn.o_proj.weight"].T
        y = rms_norm(x, w[p + "post_attention_layernorm.weight"], c["eps"])
        g = y @ w[p + "mlp.gate_proj.weight"].T
        u = y @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], c["eps"])
    head = w["model.embed_tokens.weight"] if c["tied"] else w["lm_head.weight"]
    return x @ head.T


def hf_config(arch, c):
    cfg = {"architectures": ["LlamaForCausalLM" if arch == "llama" else "Qwen2ForCausalLM"],
           "model_type": arch, "vocab_size": c["vocab"], "hidden_size": c["dim"],
           "num_hidden_layers": c["layers"], "num_attention_heads": c["heads"],
           "num_key_value_heads": c["kv_heads"], "intermediate_size": c["ffn"],
           "rope_theta": c["rope_theta"], "rms_norm_eps": c["eps"], "hidden_act": "silu",
           "max_position_embeddings": 128, "tie_word_embeddings": c["tied"],
           "torch_dtype": "float32" if arch == "llama" else "bfloat16"}
    if arch == "llama":
        cfg["head_dim"] = c["dim"] // c["heads"]
    return cfg


def tiny_tokenizer_json(vocab):
    """A byte-level BPE of `vocab` ids: the 64 first byte-level symbols, no merges."""
    chars = [chr(i) for i in range(ord("!"), ord("!") + vocab - 2)]
    v = {"<|endoftext|>": 0, "<|im_end|>": 1}
    for i, ch in enumerate(chars):
        v[ch] = i + 2
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t, i in list(v.items())[:2]]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": v, "merges": []}}


def write_hf(arch, c, w, shards):
    d = os.path.join(OUT, f"tiny-{arch}-hf")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hf_config(arch, c), f, indent=1)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tiny_tokenizer_json(c["vocab"]), f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "chat_template": "{{'<|im_start|>'}}"}, f)
    if arch == "llama":  # F16 embedding, F32 rest
        tensors = {k: (v.astype(np.float16) if "embed" in k else v) for k, v in w.items()}
    else:  # BF16 everywhere: safetensors.numpy cannot write bf16, so write its bits by hand
        tensors = {k: bf16_round(v)[1] for k, v in w.items()}
    names = sorted(tensors)
    groups = [names[i::shards] for i in range(shards)]
    index = {"metadata": {}, "weight_map": {}}
    for i, group in enumerate(groups):
        fname = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        path = os.path.join(d, fname)
        save_file({k: tensors[k] for k in group}, path)
        if arch == "qwen2":
            relabel_bf16(path)
        for k in group:
            index["weight_map"][k] = fname
    if shards > 1:
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=1)


def relabel_bf16(path):
    """safetensors.numpy wrote the bf16 bits as U16: relabel them BF16 (the data is unchanged)."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8: 8 + n])
    for k, v in header.items():
        if k != "__metadata__":
            v["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data[8 + n:])


def permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: per head, rows [2, D/2] -> [D/2, 2]."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {"input_layernorm.weight": "attn_norm.weight",
              "post_attention_layernorm.weight": "ffn_norm.weight",
              "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
              "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
              "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
              "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
              "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    return f"blk.{parts[2]}." + GGUF_NAMES[".".join(parts[3:])]


def write_gguf(arch, c, w):
    wr = gguf.GGUFWriter(os.path.join(OUT, f"tiny-{arch}.gguf"), arch)
    wr.add_block_count(c["layers"])
    wr.add_context_length(128)
    wr.add_embedding_length(c["dim"])
    wr.add_feed_forward_length(c["ffn"])
    wr.add_head_count(c["heads"])
    wr.add_head_count_kv(c["kv_heads"])
    wr.add_rope_freq_base(c["rope_theta"])
    wr.add_layer_norm_rms_eps(c["eps"])
    for hf, v in w.items():
        name = gguf_name(hf)
        if arch == "llama" and name.endswith("attn_q.weight"):
            v = permute(v, c["heads"])
        if arch == "llama" and name.endswith("attn_k.weight"):
            v = permute(v, c["kv_heads"])
        if arch == "llama" and name == "token_embd.weight":
            wr.add_tensor(name, v.astype(np.float16))
        elif arch == "llama" and name == "blk.0.ffn_down.weight":
            wr.add_tensor(name, gguf.quants.quantize(v, Q.Q8_0), raw_dtype=Q.Q8_0)
        else:
            wr.add_tensor(name, v)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def gguf_values(arch, w):
    """The weights as the GGUF file stores them, dequantised (what a loader must reproduce)."""
    out = dict(w)
    if arch == "llama":
        out["model.embed_tokens.weight"] = w["model.embed_tokens.weight"].astype(np.float16).astype(np.float32)
        q = gguf.quants.quantize(w["model.layers.0.mlp.down_proj.weight"], Q.Q8_0)
        out["model.layers.0.mlp.down_proj.weight"] = gguf.quants.dequantize(q, Q.Q8_0)
    return out


def random_blocks(qtype, n_blocks, rng):
    """Random bytes for n_blocks of qtype, with every f16 scale set to a sane value."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    scale_at = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q5_0: [0], Q.Q4_1: [0, 2], Q.Q5_1: [0, 2],
                Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [size - 2]}[qtype]
    for off in scale_at:
        raw[:, off: off + 2] = rng.uniform(0.001, 0.1, n_blocks).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw


def write_quants(rng):
    wr = gguf.GGUFWriter(os.path.join(OUT, "quants.gguf"), "llama")
    ref = {}
    for qtype in [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q4_K, Q.Q5_K, Q.Q6_K]:
        block = gguf.GGML_QUANT_SIZES[qtype][0]
        rows, cols = 2, 2 * max(block, 256)
        raw = random_blocks(qtype, rows * cols // block, rng).reshape(rows, -1)
        wr.add_tensor(qtype.name, raw, raw_dtype=qtype)
        ref[qtype.name] = gguf.quants.dequantize(raw, qtype).reshape(-1).tolist()
    x = rng.normal(0, 1, (2, 16)).astype(np.float32)
    wr.add_tensor("F32", x)
    wr.add_tensor("F16", x.astype(np.float16))
    ref["F32"] = x.reshape(-1).tolist()
    ref["F16"] = x.astype(np.float16).astype(np.float32).reshape(-1).tolist()
    xb, bits = bf16_round(x)
    wr.add_tensor("BF16", bits, raw_dtype=Q.BF16)
    ref["BF16"] = xb.reshape(-1).tolist()
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    with open(os.path.join(OUT, "quants-reference.json"), "w") as f:
        json.dump(ref, f)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(19)
    reference = {"tokens": TOKENS}
    for arch in ["llama", "qwen2"]:
        c = tiny_config(arch)
        w = random_weights(c, rng)
        if arch == "qwen2":  # the HF file holds bf16: the reference uses those values
            w = {k: bf16_round(v)[0] for k, v in w.items()}
        write_hf(arch, c, w, shards=1 if arch == "llama" else 2)
        write_gguf(arch, c, w)
        hf_w = dict(w)
        if arch == "llama":
            hf_w["model.embed_tokens.weight"] = w["model.embed_tokens.weight"].astype(np.float16).astype(np.float32)
        reference[f"{arch}-hf"] = forward(c, hf_w, TOKENS).round(6).tolist()
        reference[f"{arch}-gguf"] = forward(c, gguf_values(arch, w), TOKENS).round(6).tolist()
    with open(os.path.join(OUT, "tiny-reference.json"), "w") as f:
        json.dump(reference, f)
    write_quants(rng)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    sys.exit(main())
