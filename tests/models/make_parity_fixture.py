#!/usr/bin/env python3
"""Reference logits and greedy continuations of SmolLM2-135M-Instruct, for pretrained_test's
parity check of our loader and forward. Two references:

--reference llama.cpp (llama-cpp-python; it builds llama.cpp from source, which takes from 10
minutes to over an hour on 2 loaded cores, so scripts/setup.sh does not install it):

llama.cpp multiplies quantised weights by activations it quantises to 8 bits, which alone moves
logits by ~1e-2; so the reference runs on a float32 copy of the GGUF, dequantised by the gguf
package (not by our code), with a float32 KV cache. Our loader reads the original Q4_1 file, so
the check covers our dequantisation, the Q/K un-permutation and the forward at once.

--reference numpy: the weights dequantised and their Q/K rows unpermuted by scripts/gguf_to_hf.py
(the gguf package's dequantiser), then the plain float64 numpy Llama forward of
make_tiny_models.py. Independent of our C++ code, but written here: weaker than llama.cpp.

Prompt token ids come from the Python `tokenizers` package on the tokenizer built from the GGUF
(make_tokenizer_fixture.py), so both sides see the same ids.

Usage: make_parity_fixture.py MODEL.gguf [--reference llama.cpp|numpy]
Writes tests/models/fixtures/smollm2-parity.json (the file records which reference wrote it).
"""
import json
import os
import sys
import tempfile

import numpy as np
import gguf
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from make_tokenizer_fixture import tokenizer_json  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "smollm2-parity.json")
PROMPTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. In 1969, the first",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
]
N_GREEDY = 32
N_TOP = 64
N_SAMPLE = 64


def float32_copy(src, dst):
    """The GGUF at src with every tensor dequantised to F32 (metadata copied as is)."""
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "general.file_type":
            w.add_uint32(key, 0)  # all F32
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(field.parts[i]) for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(key, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_key_value(key, bytes(field.parts[-1]), vtype)
        else:
            w.add_key_value(key, field.parts[-1].tolist()[0], vtype)
    for t in r.tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, x.reshape([int(n) for n in reversed(t.shape)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def positions_record(scores, rng):
    """Top-N and a fixed random sample of logits at each of the last 3 positions."""
    out = []
    for row in scores[-3:]:
        top = np.argsort(-row)[:N_TOP]
        sample = rng.choice(len(row), N_SAMPLE, replace=False)
        ids = [int(i) for i in np.concatenate([top, sample])]
        out.append({"ids": ids, "logits": [float(row[i]) for i in ids]})
    return out


def llama_cpp_cases(model, tok, rng):
    import llama_cpp
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        f32 = os.path.join(tmp, "smollm2-f32.gguf")
        float32_copy(model, f32)
        llm = llama_cpp.Llama(model_path=f32, n_ctx=256, n_batch=256, logits_all=True,
                              n_threads=2, verbose=False, type_k=0, type_v=0,
                              flash_attn=False, seed=0)
        for text in PROMPTS:
            ids = tok.encode(text, add_special_tokens=False).ids
            llm.reset()
            llm.eval(ids)
            scores = np.array(llm.scores[: len(ids)], dtype=np.float64)
            record = {"text": text, "ids": ids, "positions": positions_record(scores, rng)}
            greedy = []
            nxt = int(np.argmax(scores[-1]))
            for _ in range(N_GREEDY):
                greedy.append(nxt)
                llm.eval([nxt])
                nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            record["greedy"] = greedy
            cases.append(record)
    return cases, "llama.cpp (llama-cpp-python " + llama_cpp.__version__ + ") on a float32 copy dequantised by the gguf package; float32 KV cache"


def numpy_cases(model, tok, rng):
    from gguf_to_hf import field, hf_tensors
    from make_tiny_models import forward
    r = gguf.GGUFReader(model)
    w = hf_tensors(r, model)
    c = dict(vocab=w["model.embed_tokens.weight"].shape[0], dim=field(r, "llama.embedding_length"),
             layers=field(r, "llama.block_count"), heads=field(r, "llama.attention.head_count"),
             kv_heads=field(r, "llama.attention.head_count_kv"),
             ffn=field(r, "llama.feed_forward_length"),
             rope_theta=float(field(r, "llama.rope.freq_base")),
             eps=float(field(r, "llama.attention.layer_norm_rms_epsilon")),
             tied="lm_head.weight" not in w, bias=False)
    cases = []
    for text in PROMPTS:
        ids = tok.encode(text, add_special_tokens=False).ids
        scores = forward(c, w, ids)
        record = {"text": text, "ids": ids, "positions": positions_record(scores, rng)}
        seq, greedy = list(ids), []
        for _ in range(N_GREEDY):
            nxt = int(np.argmax(scores[-1]))
            greedy.append(nxt)
            seq.append(nxt)
            scores = forward(c, w, seq)  # whole sequence again: no cache to get wrong
        record["greedy"] = greedy
        cases.append(record)
    return cases, "numpy float64 Llama forward (make_tiny_models.forward) on weights dequantised by the gguf package"


def main():
    model = sys.argv[1]
    reference = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--reference" else "llama.cpp"
    tok = Tokenizer.from_str(json.dumps(tokenizer_json(model)))
    rng = np.random.default_rng(19)
    if reference == "llama.cpp":
        cases, what = llama_cpp_cases(model, tok, rng)
    else:
        cases, what = numpy_cases(model, tok, rng)
    for record in cases:
        record["greedy_text"] = tok.decode(record["greedy"], skip_special_tokens=False)
        print(repr(record["text"][:40]), "->", repr(record["greedy_text"]))
    with open(OUT, "w") as f:
        json.dump({"model": os.path.basename(model), "reference": what, "prompts": cases}, f,
                  indent=1)
    print(f"wrote {OUT} ({what})")


if __name__ == "__main__":
    sys.exit(main())
