"""A verl-style reward function for GSM8K-style answers, to run with verl_reward.py:

    reward:
      type: command
      command: ["python3", "examples/rewards/verl_reward.py", "examples/rewards/gsm8k_score.py"]
      fields: [data_source, extra_info]

compute_score reads the number after the response's last "####" (GSM8K's marker; commas
dropped) and scores 1.0 when it equals ground_truth, else 0.0, as verl's gsm8k reward does in
its strict mode. extra_info {"method": "flexible"} reads the response's last number instead.
"""
import re

_MARKED = re.compile(r"#### *(-?[0-9.,]+)")
_NUMBER = re.compile(r"-?[0-9][0-9.,]*")


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    flexible = (extra_info or {}).get("method") == "flexible"
    found = _NUMBER.findall(solution_str) if flexible else _MARKED.findall(solution_str)
    if not found:
        return 0.0
    answer = found[-1].replace(",", "").rstrip(".")
    return 1.0 if answer == str(ground_truth).replace(",", "") else 0.0
