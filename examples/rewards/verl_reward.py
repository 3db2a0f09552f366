#!/usr/bin/env python3
"""A verl-style reward function as a tlt reward program (spec.reward.type: command).

verl calls a reward function as

    compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)

and takes back a float, a bool or a dict with a "score". This file runs such a function on tlt's
JSON lines (docs/rewards.md), with no line of your own:

    reward:
      type: command
      command: ["python3", "examples/rewards/verl_reward.py", "my_reward.py"]
      fields: [data_source, extra_info]

`my_reward.py:other_name` names a function other than compute_score. From your own file it is
one line, `verl_reward.serve(compute_score)`, with this directory on sys.path.

What each argument is: solution_str the response; ground_truth the row's answerField value (in
verl's layout `answerField: reward_model.ground_truth`); data_source and extra_info the row's
fields of those names, which the request carries when spec.reward.fields asks for them (None
where a row lacks one).

What it does for you: the answers go to stdout, one per request, flushed; whatever your code
prints (at import or while scoring) goes to stderr, the job's log, so a print never corrupts the
answers; the float, bool or dict is passed on as it is (tlt reads all three; numpy scalars become
plain numbers). An exception prints its traceback on stderr and answers null, which fails the
step naming the request: a reward with a bug should not be trained on.
"""
import contextlib
import importlib.util
import json
import os
import sys
import traceback


def load(target):
    """The function `target` names: "path/to/file.py" (its compute_score) or "file.py:name"."""
    path, name = target, "compute_score"
    if ":" in target and not target.endswith(".py"):
        path, name = target.rsplit(":", 1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("tlt_user_reward", path)
    if spec is None:
        sys.exit("verl_reward: %s is not a Python file" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tlt_user_reward"] = module
    with contextlib.redirect_stdout(sys.stderr):  # a banner printed at import
        spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        sys.exit("verl_reward: %s defines no function %s" % (path, name))
    return function


def plain(value):
    """numpy scalars (and anything with .item()) as plain JSON values."""
    return value.item() if hasattr(value, "item") else str(value)


def serve(compute_score, requests=None, answers=None):
    """Answers every request line of `requests` (stdin) on `answers` (stdout) until end of input."""
    requests = requests or sys.stdin
    answers = answers or sys.stdout
    for line in requests:
        if not line.strip():
            continue
        r = json.loads(line)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                reward = compute_score(data_source=r.get("data_source"), solution_str=r["response"],
                                       ground_truth=r["answer"], extra_info=r.get("extra_info"))
        except Exception:  # noqa: BLE001 (the user's code: any failure)
            traceback.print_exc()
            print("verl_reward: %s failed on request %s; answering null" %
                  (getattr(compute_score, "__name__", "the function"), r["id"]), file=sys.stderr)
            reward = None
        answers.write(json.dumps({"id": r["id"], "reward": reward}, default=plain) + "\n")
        answers.flush()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: verl_reward.py FILE.py[:FUNCTION]  (default FUNCTION: compute_score)")
    serve(load(sys.argv[1]))
