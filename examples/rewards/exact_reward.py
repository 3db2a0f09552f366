#!/usr/bin/env python3
"""A reward program for `spec.reward.type: command` that imitates the built-in `exact` verifier
(runtime/reward/verifiers.h, docs/rewards.md): the response's final answer (the last \\boxed{},
else the last of "####", "answer is", "answer:"), or the whole response when it marks none,
equals the reference after the same normalisation (trim, trailing periods dropped, runs of
blanks made one space, ASCII case folded). It scores 1.0 or 0.0. It is the command twin of
examples/rljob-smollm2-short-arith.yaml's reward; ScorerTest.PythonExactRewardMatchesTheBuiltInVerifier
(tests/runtime/scorer_test.cc) asserts that it gives the built-in verifier's rewards.

    reward:
      type: command
      command: ["python3", "examples/rewards/exact_reward.py"]

Wire format as numeric_reward.py's (docs/rewards.md); the answer extraction is numeric_reward.py's.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numeric_reward import extract_final_answer, is_space, reference_texts, trim  # noqa: E402


def normalize_text(text):
    s = trim(text)
    while s and (s[-1] == "." or is_space(s[-1])):
        s = s[:-1]
    out = []
    for c in s:
        if is_space(c):
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(c.lower() if "A" <= c <= "Z" else c)
    return "".join(out)


def score(response, answer):
    """1.0 or 0.0; ValueError for a reference that is not a string, a number or a list of them."""
    marked = extract_final_answer(response)
    got = normalize_text(marked if marked is not None else response)
    return 1.0 if any(normalize_text(ref) == got for ref in reference_texts(answer)) else 0.0


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            reward = score(request["response"], request["answer"])
        except ValueError as e:
            print("exact_reward: %s: %s" % (request["id"], e), file=sys.stderr)
            reward = None
        print(json.dumps({"id": request["id"], "reward": reward}), flush=True)


if __name__ == "__main__":
    main()
