#!/usr/bin/env python3
"""Loads a directory `tlt export` wrote with Hugging Face transformers and compares its logits to
ours. Usage: check_export.py HF_DIR REF_JSON, where REF_JSON is {"tokens": [[ids]], "logits":
[[[floats]]]} (B, T, V) from our forward. Prints the largest difference relative to the largest
logit and exits 1 when it is above 1e-4 (or transformers cannot load the directory)."""
import json
import sys

import torch
import transformers


def main():
    hf_dir, ref_path = sys.argv[1], sys.argv[2]
    ref = json.load(open(ref_path))
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    tokens = torch.tensor(ref["tokens"], dtype=torch.int64)  # (B, T)
    ours = torch.tensor(ref["logits"], dtype=torch.float64)  # (B, T, V)
    with torch.no_grad():
        theirs = model(tokens).logits.double()  # (B, T, V)
    if theirs.shape != ours.shape:
        print("FAIL: transformers' logits are %s, ours %s" % (tuple(theirs.shape), tuple(ours.shape)))
        return 1
    maxdiff = (theirs - ours).abs().max().item()
    rel = maxdiff / ours.abs().max().item()
    print("export parity: %s (%s, transformers %s): maxdiff %.3g, relative %.3g" % (
        hf_dir, type(model).__name__, transformers.__version__, maxdiff, rel))
    if rel > 1e-4:
        print("FAIL: relative difference above 1e-4")
        return 1
    if "text" in ref:  # the exported tokenizer loads and spells the text as ours does
        tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
        ids = tok(ref["text"], add_special_tokens=False).input_ids
        if ids != ref["text_ids"]:
            print("FAIL: transformers' tokenizer gives %s, ours %s" % (ids, ref["text_ids"]))
            return 1
        print("export parity: the tokenizer gives our %d ids" % len(ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
