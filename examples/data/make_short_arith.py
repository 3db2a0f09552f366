#!/usr/bin/env python3
"""Writes examples/data/short-arith/{train,heldout}.jsonl: one-operation sums and differences of
small whole numbers, asked for a bare-number reply.

Generated here from a fixed seed (no third-party data; the files are as free as this script):
the same command always writes the same bytes. A row is {"prompt": str, "answer": str}; the
held-out rows are problems that never appear in train.jsonl.

Usage: python3 examples/data/make_short_arith.py [--seed 39] [--train 1000] [--heldout 64]
"""
import argparse
import json
import os
import random

INSTRUCTION = "Reply with only the number."


def all_problems():
    """Every (prompt, answer): a + b and a - b (a >= b, no negative answers) for a, b in 2..19."""
    out = []
    for a in range(2, 20):
        for b in range(2, 20):
            out.append((f"What is {a} + {b}? {INSTRUCTION}", a + b))
            if a >= b:
                out.append((f"What is {a} - {b}? {INSTRUCTION}", a - b))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--heldout", type=int, default=64)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "short-arith"))
    args = ap.parse_args()
    # Every problem once, in a seeded order; the first `heldout` are held out.
    rows = [{"prompt": p, "answer": str(a)} for p, a in all_problems()]
    random.Random(args.seed).shuffle(rows)
    held, train = rows[: args.heldout], rows[args.heldout: args.heldout + args.train]
    os.makedirs(args.out, exist_ok=True)
    for name, part in (("train.jsonl", train), ("heldout.jsonl", held)):
        with open(os.path.join(args.out, name), "w", encoding="utf-8", newline="\n") as f:
            for row in part:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{args.out}: {len(train)} training rows, {len(held)} held out")


if __name__ == "__main__":
    main()
