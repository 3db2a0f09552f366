#!/usr/bin/env python3
"""Writes job manifests near the edges of the schema, one JSON file each, for
crd_validate_agree.sh.

Each case is the cluster RLJob example (or the TSTPretrainJob one) with one field set to an
edge value: quantities (signs, suffixes, exponents, spaces, lengths), arm names (leading zeros,
bounds, long digit runs, tree sizes), integer bounds and durations. A seeded random part
combines two edges at once; fixed pairs set trainer ranks against prompts per step. Usage: validate_cases.py SOURCE_DIR OUT_DIR [N_RANDOM] [SEED]
Prints one line per case: "<file> <field path> <value>".
"""
import copy
import json
import os
import random
import sys

import yaml

src, out = sys.argv[1], sys.argv[2]
n_random = int(sys.argv[3]) if len(sys.argv) > 3 else 60
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 21)

rl = yaml.safe_load(open(os.path.join(src, "examples/rljob-cluster.yaml")))
tst = yaml.safe_load(open(os.path.join(src, "examples/tst-cluster.yaml")))

QUANTITIES = ["1", "0", "-1", "-0", "+1", "-0.5", "1e3", "1E-3", "1e+3", "0.5Gi", "1Ki", ".5",
              "5.", "1.5m", "-1Gi", "-.5", "1ki", "1e", "1 ", " 1", "1.0.0", "", "e3", "Gi",
              "1Gib", "9" * 40, "9" * 64 + "Gi", "1" * 70, "0x10", "1_000", "100m", "2Ti", "3E",
              "1e-9", "-1e3", "+.5Mi"]
ARMS = ["ngram", "ngram_1", "ngram_64", "ngram_65", "ngram_0", "ngram_01", "ngram_0001",
        "ngram_00001", "ngram_0000000001", "ngram_", "ngram_-1", "ngram_1a", "ngram_9999",
        "8_4_16", "1_1_1", "1_1_2", "1_1_3", "64_64_1", "0_4_16", "65_4_16", "8_0_16", "8_65_16",
        "8_4_0", "08_4_16", "8_04_16", "8_4_016", "0008_4_16", "8_4", "8_4_16_1", "a_b_c",
        "_4_16", "8__16", "2_2_7", "2_2_8", "99999999999_4_16", "8_4_99999999999",
        "8_4_" + "9" * 12, "-8_4_16", "8_4_+16", " 8_4_16", "NGRAM", "ngram_1 ", "history",
        "history_4", "History", "history "]
INTS = {("spec", "roles", "rollout", "replicas"): [-1, 0, 1, 2, 1024, 2**31 - 1, 2**31],
        ("spec", "algorithm", "groupSize"): [-1, 0, 1, 2, 8, 4096, 2**31],
        ("spec", "roles", "trainer", "replicas"): [-1, 0, 1, 2, 128, 129, 4096, 4097],
        ("spec", "backoffLimit"): [-1, 0, 1, 2**31 - 1],
        ("spec", "ttlSecondsAfterFinished"): [-1, 0, 1, 2**40]}
DURATIONS = ["0s", "10s", "1.5h", "-1s", "10", "1h30m", "", "1.s", ".5s", "1d", "s", "10S",
             "1" * 70 + "s", "3ms", "5us", "7ns"]


def setp(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d.setdefault(k, {})
    d[path[-1]] = value


def edges():
    for q in QUANTITIES:
        yield rl, ("spec", "roles", "rollout", "resources", "requests", "cpu"), q
        yield tst, ("spec", "workers", "resources", "limits", "memory"), q
    for q in [-1, 0, 4, 2**40]:  # JSON numbers, not strings
        yield rl, ("spec", "roles", "trainer", "resources", "limits", "cpu"), q
    for a in ARMS:
        yield rl, ("spec", "speculative", "arms"), [a]
    for path, values in INTS.items():
        for v in values:
            yield rl, path, v
    for d in DURATIONS:
        yield rl, ("spec", "rebalancing", "window"), d


cases = list(edges())
singles = list(cases)
for _ in range(n_random):  # two edges at once, of different fields
    (b1, p1, v1), (b2, p2, v2) = rng.sample(singles, 2)
    if b1 is not b2 or p1 == p2:
        continue
    cases.append((b1, (p1, p2), (v1, v2)))
# Trainer ranks against prompts per step (at most one rank per prompt), on both sides of the edge.
TRAINER = ("spec", "roles", "trainer", "replicas")
PROMPTS = ("spec", "algorithm", "promptsPerStep")
for ranks, prompts in [(1, 1), (2, 1), (2, 2), (3, 2), (8, 7), (4096, 4096), (4096, 4095),
                       (1, 0), (0, 4)]:
    cases.append((rl, (TRAINER, PROMPTS), (ranks, prompts)))

os.makedirs(out, exist_ok=True)
for i, (base, path, value) in enumerate(cases):
    doc = copy.deepcopy(base)
    name = "case-%d" % i
    doc["metadata"] = {"name": name, "namespace": "research"}
    if isinstance(path[0], tuple):
        for p, v in zip(path, value):
            setp(doc, p, v)
        shown = "; ".join("%s=%s" % (".".join(p), json.dumps(v)) for p, v in zip(path, value))
    else:
        setp(doc, path, value)
        shown = "%s=%s" % (".".join(path), json.dumps(value))
    with open(os.path.join(out, name + ".json"), "w") as f:  # JSON: no YAML guessing of "1e3"
        json.dump(doc, f, indent=1)
    print(name, shown)
