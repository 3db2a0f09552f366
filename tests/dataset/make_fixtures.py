#!/usr/bin/env python3
"""Writes the dataset fixtures of tests/runtime/dataset_test.cc (committed; rerun to regenerate).

Needs pyarrow (PyPI; e.g. python3 -m venv /tmp/v && /tmp/v/bin/pip install pyarrow==26.0.1).
  arith.jsonl            12 rows: a string prompt, a numeric answer, a nested field
  verl.parquet           8 rows in verl's layout: prompt as chat messages, reward_model.ground_truth,
                         data_source; snappy, two row groups of 4
  shards/part-000.parquet, shards/part-001.jsonl, shards/part-002.parquet
                         a directory of 3 shards (zstd, JSONL, gzip) of 3 rows each
  wrong_schema.parquet   columns question and solution (no prompt, no answer)
Usage: make_fixtures.py [OUT_DIR]  (default: this script's directory)
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


def arith(i):
    a, b = 3 + i, 7 + 2 * i
    return {"prompt": f"What is {a} + {b}?", "answer": str(a + b),
            "extra": {"id": i, "level": "easy" if i % 2 == 0 else "hard"}}


with open(os.path.join(out, "arith.jsonl"), "w") as f:
    for i in range(12):
        f.write(json.dumps(arith(i)) + "\n")


def verl(i):
    a, b = 2 + i, 5 + i
    return {"data_source": "tlt/arith",
            "prompt": [{"role": "system", "content": "Answer with a number."},
                       {"role": "user", "content": f"Compute {a} * {b}."}],
            "reward_model": {"style": "rule", "ground_truth": str(a * b)}}


rows = [verl(i) for i in range(8)]
pq.write_table(pa.Table.from_pylist(rows), os.path.join(out, "verl.parquet"),
               compression="snappy", row_group_size=4)

shards = os.path.join(out, "shards")
os.makedirs(shards, exist_ok=True)
part = [[arith(100 + 3 * k + j) for j in range(3)] for k in range(3)]
pq.write_table(pa.Table.from_pylist(part[0]), os.path.join(shards, "part-000.parquet"),
               compression="zstd")
with open(os.path.join(shards, "part-001.jsonl"), "w") as f:
    for r in part[1]:
        f.write(json.dumps(r) + "\n")
pq.write_table(pa.Table.from_pylist(part[2]), os.path.join(shards, "part-002.parquet"),
               compression="gzip")

pq.write_table(pa.Table.from_pylist([{"question": "1 + 1?", "solution": "2"}] * 3),
               os.path.join(out, "wrong_schema.parquet"))
