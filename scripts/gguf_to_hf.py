#!/usr/bin/env python3
"""Converts a llama-architecture GGUF file (SmolLM2's, say) to a Hugging Face directory:
config.json, model.safetensors, tokenizer.json, tokenizer_config.json.

Weights are dequantised by the gguf package and written as float32 (or --dtype f16 / bf16); the
Q and K rows that llama.cpp's converter permuted for its interleaved RoPE are put back in Hugging
Face's order. The tokenizer.json is rebuilt from the GGUF's vocabulary and merges (gpt2 / smollm
pre-tokenizer only, as in tests/models/make_tokenizer_fixture.py).

Usage: scripts/gguf_to_hf.py MODEL.gguf OUT_DIR [--dtype f32|f16|bf16]
Needs numpy, gguf, safetensors (scripts/setup.sh's venv: ~/.cache/tlt/venv/bin/python).
"""
import argparse
import json
import os
import sys

import numpy as np
import gguf
from safetensors.numpy import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
from make_tokenizer_fixture import tokenizer_json  # noqa: E402

HF_NAMES = {"attn_norm.weight": "input_layernorm.weight",
            "ffn_norm.weight": "post_attention_layernorm.weight",
            "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
            "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
            "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
            "ffn_down.weight": "mlp.down_proj.weight"}


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[-1]).decode()
    return f.parts[f.data[0]].tolist()[0]


def unpermute(w, heads):
    """Inverse of convert_hf_to_gguf.py's permute: per head, rows [D/2, 2] -> [2, D/2]."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    _, layer, rest = name.split(".", 2)
    return f"model.layers.{layer}.{HF_NAMES[rest]}"


def hf_tensors(r, path):
    """The GGUF's tensors as float32 numpy arrays under Hugging Face names, Q/K rows unpermuted."""
    arch = field(r, "general.architecture")
    if arch != "llama":
        sys.exit(f"{path}: architecture {arch!r}: this converter handles llama only")
    heads, kv_heads = field(r, "llama.attention.head_count"), field(r, "llama.attention.head_count_kv")
    tensors = {}
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.reshape([int(n) for n in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            x = unpermute(x, heads)
        if t.name.endswith("attn_k.weight"):
            x = unpermute(x, kv_heads)
        tensors[hf_name(t.name)] = x
    return tensors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf_file")
    ap.add_argument("out_dir")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    a = ap.parse_args()
    r = gguf.GGUFReader(a.gguf_file)
    tensors = hf_tensors(r, a.gguf_file)
    tied = "lm_head.weight" not in tensors
    heads, kv_heads = field(r, "llama.attention.head_count"), field(r, "llama.attention.head_count_kv")
    if a.dtype == "f16":
        tensors = {k: v.astype(np.float16) for k, v in tensors.items()}
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "model.safetensors")
    if a.dtype == "bf16":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
        from make_tiny_models import bf16_round, relabel_bf16
        save_file({k: bf16_round(v)[1] for k, v in tensors.items()}, path, metadata={"format": "pt"})
        relabel_bf16(path)
    else:
        save_file(tensors, path, metadata={"format": "pt"})  # transformers requires the tag
    emb = tensors["model.embed_tokens.weight"]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "vocab_size": int(emb.shape[0]), "hidden_size": int(emb.shape[1]),
              "num_hidden_layers": field(r, "llama.block_count"),
              "num_attention_heads": heads, "num_key_value_heads": kv_heads,
              "intermediate_size": field(r, "llama.feed_forward_length"),
              "max_position_embeddings": field(r, "llama.context_length", 2048),
              "rope_theta": float(field(r, "llama.rope.freq_base", 10000.0)),
              "rms_norm_eps": float(field(r, "llama.attention.layer_norm_rms_epsilon")),
              "hidden_act": "silu", "tie_word_embeddings": tied,
              "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[a.dtype]}
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(a.out_dir, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(a.gguf_file), f)
    tokens = r.fields["tokenizer.ggml.tokens"]
    names = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    tok_config = {"chat_template": field(r, "tokenizer.chat_template", ""),
                  "bos_token": names[field(r, "tokenizer.ggml.bos_token_id", 0)],
                  "eos_token": "<|im_end|>" if "<|im_end|>" in names
                  else names[field(r, "tokenizer.ggml.eos_token_id", 0)],
                  "add_bos_token": False}
    with open(os.path.join(a.out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tok_config, f, indent=1)
    print(f"wrote {a.out_dir}: {len(tensors)} tensors ({a.dtype}), tied={tied}")


if __name__ == "__main__":
    main()
