#!/usr/bin/env python3
"""Reference logits and greedy continuations from Hugging Face `transformers` (code no one here
wrote), for pretrained_test's Transformers.* parity checks of our loader and forward.

Two models:

smollm2: SmolLM2-135M-Instruct as the Hugging Face directory that scripts/gguf_to_hf.py converts
  from the GGUF (float32; the gguf package dequantises), loaded by LlamaForCausalLM. Prompt ids
  come from that directory's tokenizer.json through transformers' own tokenizer class. Writes
  fixtures/smollm2-transformers.json.

qwen2: a tiny randomly initialised Qwen2ForCausalLM built and saved by transformers itself
  (save_pretrained: config.json + model.safetensors, tied embeddings). transformers initialises
  Linear biases to zero, so the Q/K/V biases (the path this model exists to cover) and the norms
  are drawn again from a seeded generator before saving. Writes fixtures/tiny-qwen2-transformers/
  (with the tiny tokenizer of make_tiny_models.py beside it, so it is a whole model directory)
  and fixtures/tiny-qwen2-transformers.json.

Each JSON holds, per prompt, the ids, every position's top-64 logits and 64 fixed random ones, and
the 32-token greedy continuation of a plain loop of full forwards (argmax, no cache, no stop).

--check DIR: write to DIR instead and compare with the committed fixtures (ids and greedy tokens
  equal, logits within 1e-5 relative, tiny checkpoint bytes equal): the test
  models.transformers_current runs this, so the fixtures are what this script writes.

Needs torch and transformers: scripts/setup.sh installs Debian's python3-torch (1.13) and a venv
with transformers 4.40.2 over it (~/.cache/tlt/venv-hf).

Usage: make_transformers_parity.py smollm2 --hf DIR [--check OUT]
       make_transformers_parity.py qwen2 [--check OUT]
"""
import argparse
import filecmp
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
SMOLLM2_PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. In 1969, the first",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
]
QWEN2_PROMPTS = [[1, 5, 9, 17, 33, 2, 40, 63, 0, 12, 7, 7, 50], [3, 3, 3, 3], list(range(60, 20, -3))]
N_GREEDY = 32
N_TOP = 64
N_SAMPLE = 64


@torch.no_grad()
def logits_of(model, ids):
    """(T, V) float64 logits of a whole-sequence forward."""
    out = model(torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].double().numpy()


def record(model, ids, rng):
    """One prompt's reference: the top-N and a random sample of logits at every position, and
    the greedy continuation (a full forward per token: no cache to get wrong)."""
    scores = logits_of(model, ids)
    positions = []
    for row in scores:
        top = np.argsort(-row)[:N_TOP]
        sample = rng.choice(len(row), min(N_SAMPLE, len(row)), replace=False)
        vid = [int(i) for i in np.concatenate([top, sample])]
        positions.append({"ids": vid, "logits": [float(row[i]) for i in vid]})
    seq, greedy = list(ids), []
    for _ in range(N_GREEDY):
        nxt = int(np.argmax(scores[-1]))
        greedy.append(nxt)
        seq.append(nxt)
        scores = logits_of(model, seq)
    return {"ids": list(ids), "positions": positions, "greedy": greedy}


def what():
    return (f"transformers {transformers.__version__} (torch {torch.__version__}), float32, "
            "full forwards without cache")


def smollm2(hf_dir, out):
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(hf_dir)
    rng = np.random.default_rng(19)
    cases = []
    for text in SMOLLM2_PROMPTS:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        rec = {"text": text, **record(model, ids, rng)}
        rec["greedy_text"] = tok.decode(rec["greedy"])
        print(repr(text[:40]), "->", repr(rec["greedy_text"]))
        cases.append(rec)
    path = os.path.join(out, "smollm2-transformers.json")
    with open(path, "w") as f:
        json.dump({"model": "SmolLM2-135M-Instruct (gguf_to_hf.py, float32)", "reference": what(),
                   "prompts": cases}, f, indent=1)
    return [path]


def tiny_qwen2(out):
    torch.manual_seed(19)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                         initializer_range=0.2, torch_dtype="float32")
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.3)
            elif "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
    model_dir = os.path.join(out, "tiny-qwen2-transformers")
    model.save_pretrained(model_dir, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(FIXTURES, "tiny-qwen2-hf", f), os.path.join(model_dir, f))
    model = Qwen2ForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    rng = np.random.default_rng(19)
    cases = [record(model, ids, rng) for ids in QWEN2_PROMPTS]
    path = os.path.join(out, "tiny-qwen2-transformers.json")
    with open(path, "w") as f:
        json.dump({"model": "tiny-qwen2-transformers", "reference": what(), "prompts": cases}, f,
                  indent=1)
    files = [os.path.join(model_dir, f) for f in sorted(os.listdir(model_dir))]
    return [path] + files


def same_reference(got_path, want_path):
    """Ids and greedy tokens equal, logits within 1e-5 of the largest |logit| (float32 sums can
    round differently with another thread count)."""
    got, want = (json.load(open(p)) for p in (got_path, want_path))
    for g, w in zip(got["prompts"], want["prompts"]):
        if g["ids"] != w["ids"] or g["greedy"] != w["greedy"]:
            return "ids or greedy continuation differ"
        for gp, wp in zip(g["positions"], w["positions"]):
            a, b = dict(zip(gp["ids"], gp["logits"])), dict(zip(wp["ids"], wp["logits"]))
            common = sorted(set(a) & set(b))  # near-ties may swap places in the top-N
            if len(common) < N_TOP:
                return "top logits differ"
            diff = max(abs(a[i] - b[i]) for i in common)
            if diff > 1e-5 * max(abs(v) for v in b.values()):
                return f"logits differ by {diff:.3g}"
    return "" if len(got["prompts"]) == len(want["prompts"]) else "prompt count differs"


def check(written, out):
    status = 0
    for path in written:
        rel = os.path.relpath(path, out)
        want = os.path.join(FIXTURES, rel)
        if not os.path.exists(want):
            print(f"FAIL: tests/models/fixtures/{rel} is missing")
            status = 1
            continue
        why = (same_reference(path, want) if rel.endswith("transformers.json")
               else "" if filecmp.cmp(path, want, shallow=False) else "bytes differ")
        if why:
            print(f"FAIL: tests/models/fixtures/{rel}: {why} from what this script writes now")
            status = 1
    if status == 0:
        print(f"ok: {len(written)} files equal what {what()} writes")
    return status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["smollm2", "qwen2"])
    ap.add_argument("--hf", help="SmolLM2's Hugging Face directory (scripts/gguf_to_hf.py)")
    ap.add_argument("--check", metavar="OUT")
    a = ap.parse_args()
    torch.set_num_threads(1)
    out = a.check or FIXTURES
    os.makedirs(out, exist_ok=True)
    if a.model == "smollm2":
        if not a.hf:
            sys.exit("smollm2 needs --hf DIR (scripts/gguf_to_hf.py SmolLM2.gguf DIR)")
        written = smollm2(a.hf, out)
    else:
        written = tiny_qwen2(out)
    if a.check:
        return check(written, out)
    print("wrote", ", ".join(os.path.relpath(p, FIXTURES) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
