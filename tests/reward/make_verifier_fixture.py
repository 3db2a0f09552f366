#!/usr/bin/env python3
"""Writes fixtures/math_verify_cases.jsonl: (response, reference, verdict) cases whose verdict is
math-verify's (PyPI, Hugging Face): verify(parse(reference), parse(response)). The C++ test
tests/runtime/verifier_agreement_test.cc reads the table offline and measures how often tlt's
`math` verifier agrees (docs/rewards.md lists the disagreements).

Usage:
  python3 -m venv /tmp/mv && /tmp/mv/bin/pip install 'math-verify==0.9.0'
  /tmp/mv/bin/python tests/reward/make_verifier_fixture.py

The cases are written out below, not drawn at random: responses in the styles RL policies
produce (\\boxed{}, GSM8K's "####", "The answer is", prose ending in a number, LaTeX fractions and
roots, units, percentages), each with right answers, wrong ones and near misses.
"""
import importlib.metadata
import json
import os
import sys

from math_verify import parse, verify

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "math_verify_cases.jsonl")

# (reference, [responses]): every response is scored against its reference.
GROUPS = [
    ("42", [
        "Adding them up gives 40 + 2 = 42. So the answer is \\boxed{42}.",
        "Step 1: 6 * 7 = 42.\n#### 42",
        "The answer is 42.",
        "We have 6 rows of 7 chairs, which makes 42 chairs in total.",
        "\\boxed{42.0}",
        "\\boxed{41}",
        "6 * 7 = 43\n#### 43",
        "The answer is 24.",
        "I am not sure how to solve this problem.",
        "",
        "So there are 42 apples and 3 baskets, leaving 14 per basket.",
        "\\boxed{42} apples",
        "$\\boxed{42}$",
        "Final answer: \\boxed{ 42 }",
        "The final answer is $42$.",
    ]),
    ("18", [
        "Janet sells 16 - 3 - 4 = 9 duck eggs a day. She makes 9 * 2 = $18 every day.\n#### 18",
        "She earns 9 * $2 = $18.\nThe answer is $18.",
        "\\boxed{\\$18}",
        "\\boxed{18 \\text{ dollars}}",
        "#### 18.00",
        "#### 16",
        "She keeps 3 for breakfast and bakes 4, so 16 - 7 = 9 eggs, for $18 in all... wait, 9*2=19.",
        "\\boxed{18}\n\nActually let me double check: 9 * 2 = 18. Yes, 18.",
        "The answer is 18 dollars",
    ]),
    ("1234", [
        "\\boxed{1,234}",
        "#### 1,234",
        "The answer is 1234.",
        "The total is 1{,}234.",
        "\\boxed{1234.5}",
        "\\boxed{1,243}",
        "That is 1 234 in all.",
    ]),
    ("\\frac{3}{4}", [
        "\\boxed{\\frac{3}{4}}",
        "\\boxed{\\dfrac{3}{4}}",
        "\\boxed{\\tfrac34}",
        "\\boxed{0.75}",
        "The answer is $3/4$.",
        "\\boxed{\\frac{6}{8}}",
        "\\boxed{\\frac{4}{3}}",
        "\\boxed{0.7}",
        "\\boxed{\\frac{3}{5}}",
        "The probability is 3/4.",
        "\\boxed{75\\%}",
    ]),
    ("-\\frac{3}{4}", [
        "\\boxed{-\\frac{3}{4}}",
        "\\boxed{-0.75}",
        "\\boxed{\\frac{-3}{4}}",
        "\\boxed{-3/4}",
        "\\boxed{\\frac{3}{4}}",
        "The slope is $-\\frac{3}{4}$.",
        "\\boxed{\\left(-\\frac{3}{4}\\right)}",
    ]),
    ("\\frac{1}{2}", [
        "\\boxed{\\frac12}",
        "\\boxed{0.5}",
        "\\boxed{\\frac{2}{4}}",
        "\\boxed{.5}",
        "\\boxed{50\\%}",
        "\\boxed{\\frac{1}{3}}",
        "The answer is one half.",
        "\\boxed{1/2}",
    ]),
    ("\\frac{1}{3}", [
        "\\boxed{\\frac{1}{3}}",
        "\\boxed{0.3333}",
        "\\boxed{0.333333333}",
        "\\boxed{0.33}",
        "\\boxed{\\frac{2}{6}}",
        "\\boxed{3}",
    ]),
    ("\\frac{\\sqrt{2}}{2}", [
        "\\boxed{\\frac{\\sqrt{2}}{2}}",
        "\\boxed{\\frac{1}{\\sqrt{2}}}",
        "\\boxed{\\sqrt{2}/2}",
        "\\boxed{0.7071}",
        "\\boxed{0.70710678}",
        "\\boxed{\\sqrt{2}}",
        "\\boxed{\\frac{\\sqrt{3}}{2}}",
        "\\boxed{\\dfrac{\\sqrt2}{2}}",
    ]),
    ("2\\sqrt{3}", [
        "\\boxed{2\\sqrt{3}}",
        "\\boxed{\\sqrt{12}}",
        "\\boxed{2 \\sqrt 3}",
        "\\boxed{3.4641}",
        "\\boxed{3\\sqrt{2}}",
        "\\boxed{\\sqrt{3}}",
    ]),
    ("2\\pi", [
        "\\boxed{2\\pi}",
        "\\boxed{6.283185307}",
        "\\boxed{2 \\pi}",
        "\\boxed{\\pi}",
        "\\boxed{4\\pi}",
        "\\boxed{\\frac{4\\pi}{2}}",
    ]),
    ("-7", [
        "\\boxed{-7}",
        "x = -7\n#### -7",
        "The answer is -7.",
        "\\boxed{7}",
        "\\boxed{- 7}",
        "The temperature dropped to -7 degrees.",
        "\\boxed{x = -7}",
    ]),
    ("5", [
        "\\boxed{x = 5}",
        "\\boxed{x=5}",
        "Solving 2x + 3 = 13 gives x = 5.",
        "\\boxed{5}",
        "\\boxed{05}",
        "\\boxed{5.000}",
        "\\boxed{6}",
        "\\boxed{\\text{5}}",
        "\\boxed{x = 6}",
        "The answer is 5 because 2 * 5 + 3 = 13.",
    ]),
    ("50", [
        "\\boxed{50\\%}",
        "The answer is 50%.",
        "#### 50%",
        "\\boxed{50}",
        "\\boxed{0.5}",
        "\\boxed{40\\%}",
        "\\boxed{50 \\text{ percent}}",
    ]),
    ("12", [
        "\\boxed{12 \\text{ cm}}",
        "\\boxed{12\\text{cm}}",
        "The side is 12 cm.",
        "#### 12 cm",
        "\\boxed{12 \\mathrm{cm}}",
        "\\boxed{12^\\circ}",
        "\\boxed{13 \\text{ cm}}",
        "\\boxed{12 \\text{ cm}^2}",
    ]),
    ("2.5", [
        "\\boxed{2.5}",
        "\\boxed{2.50}",
        "\\boxed{\\frac{5}{2}}",
        "\\boxed{2\\frac{1}{2}}",
        "The answer is 2.5 hours.",
        "\\boxed{25}",
        "\\boxed{2.05}",
    ]),
    ("1000000", [
        "\\boxed{1,000,000}",
        "\\boxed{1000000}",
        "\\boxed{10^6}",
        "\\boxed{10^{6}}",
        "\\boxed{1 \\times 10^6}",
        "\\boxed{100000}",
        "#### 1,000,000",
    ]),
    ("123456789012345678901234567890", [
        "\\boxed{123456789012345678901234567890}",
        "\\boxed{123456789012345678901234567891}",
        "#### 123456789012345678901234567890",
    ]),
    ("0", [
        "\\boxed{0}",
        "\\boxed{0.0}",
        "\\boxed{-0}",
        "\\boxed{1}",
        "The answer is zero.",
        "The answer is 0.",
    ]),
    ("x^2 + 1", [
        "\\boxed{x^2 + 1}",
        "\\boxed{x^{2}+1}",
        "\\boxed{1 + x^2}",
        "\\boxed{x^2 - 1}",
        "\\boxed{(x+1)^2}",
    ]),
    ("2x + 3", [
        "\\boxed{2x + 3}",
        "\\boxed{2x+3}",
        "\\boxed{3 + 2x}",
        "\\boxed{2x + 4}",
    ]),
    ("9", [
        "\\boxed{3^2}",
        "\\boxed{\\sqrt{81}}",
        "\\boxed{3^{2}}",
        "\\boxed{\\left( 9 \\right)}",
        "\\boxed{10 - 1}",
        "\\boxed{8}",
        "The answer is $\\boxed{9}$",
        "We compute 3 + 3 + 3 = 9, so the answer is 9",
    ]),
    ("24", [
        "Let me think. 4! = 24. \\boxed{24}",
        "First I tried \\boxed{12}, but that is wrong. The correct count is \\boxed{24}.",
        "First I tried \\boxed{24}, but that is wrong. The correct count is \\boxed{12}.",
        "\\boxed{4!}",
        "\\boxed{\\{24\\}}",
        "**Answer:** 24",
        "Answer: 24",
        "Answer: 25",
    ]),
    ("3", [
        "The answer is $\\boxed{3}$.",
        "\\boxed{\\textbf{3}}",
        "\\boxed{\\frac{9}{3}}",
        "\\boxed{\\frac{3}{1}}",
        "\\boxed{3.0001}",
        "\\boxed{3.0000001}",
        "\\boxed{\\sqrt{9}}",
        "\\boxed{2 + 1}",
    ]),
    ("0.125", [
        "\\boxed{\\frac{1}{8}}",
        "\\boxed{0.125}",
        "\\boxed{12.5\\%}",
        "\\boxed{\\frac{1}{4}}",
        "\\boxed{1/8}",
    ]),
    ("\\frac{7}{2}", [
        "\\boxed{3.5}",
        "\\boxed{\\frac{7}{2}}",
        "\\boxed{3\\frac{1}{2}}",
        "\\boxed{\\frac{14}{4}}",
        "\\boxed{\\frac{2}{7}}",
    ]),
    ("100", [
        "\\boxed{100}",
        "\\boxed{10^2}",
        "\\boxed{99.99}",
        "\\boxed{\\$100}",
        "\\boxed{100.}",
        "The answer is 100 km/h.",
    ]),
    ("(1, 2)", [
        "\\boxed{(1, 2)}",
        "\\boxed{(1,2)}",
        "\\boxed{(2, 1)}",
        "\\boxed{[1, 2]}",
    ]),
    ("\\text{Monday}", [
        "\\boxed{\\text{Monday}}",
        "\\boxed{Monday}",
        "\\boxed{\\text{Tuesday}}",
        "The answer is Monday.",
    ]),
    ("\\sqrt{5}", [
        "\\boxed{\\sqrt{5}}",
        "\\boxed{\\sqrt5}",
        "\\boxed{5^{1/2}}",
        "\\boxed{2.2360679775}",
        "\\boxed{\\sqrt{6}}",
    ]),
    ("36", [
        "The area is $6^2 = 36$ square units.",
        "So the area is 36 square units.",
        "\\[ \\boxed{36} \\]",
        "The area is \\( 36 \\).",
        "#### 36\n\nI hope this helps! Let me know if you have 2 more questions.",
        "6 * 6 = 36, and adding the border of 4 gives 40.",
    ]),
]


def verdict(reference, response):
    # A reference is parsed as inline LaTeX, as math-verify's own examples write gold answers
    # ("$\\frac{1}{2}$"); bare, `2\\sqrt{3}` would be read as the number 2.
    gold = parse("$" + reference + "$") or parse(reference)
    return bool(verify(gold, parse(response)))


def main():
    version = importlib.metadata.version("math-verify")
    rows = []
    for reference, responses in GROUPS:
        for response in responses:
            rows.append({"response": response, "reference": reference,
                         "verdict": verdict(reference, response)})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    n_true = sum(r["verdict"] for r in rows)
    print(f"wrote {len(rows)} cases ({n_true} correct per math-verify {version}) to {OUT}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
