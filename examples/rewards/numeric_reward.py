#!/usr/bin/env python3
"""A reward program for `spec.reward.type: command` that imitates the built-in `numeric` verifier
(runtime/reward/verifiers.h, docs/rewards.md): same final-answer extraction (the last \\boxed{},
else the last of "####", "answer is", "answer:"), same number reading (thousands separators,
decimals, fractions, a unit or %, LaTeX-lite fractions and roots), same tolerances. It scores
1.0 or 0.0; ScorerTest.PythonNumericRewardMatchesTheBuiltInVerifier (tests/runtime/scorer_test.cc)
asserts that it gives the built-in verifier's rewards.

    reward:
      type: command
      command: ["python3", "examples/rewards/numeric_reward.py"]

Wire format (docs/rewards.md): one JSON object per line on stdin,
{"id", "prompt", "response", "answer"}; one {"id", "reward"} per line on stdout, flushed.
A reference that is not a number gets "reward": null (the job fails the step, as the built-in
verifier's error does) and a line on stderr.

Options: --relative-tolerance R (1e-6), --absolute-tolerance A (0), --sleep-ms MS (0: a delay
per response, for bench/reward_overlap.sh).
"""
import argparse
import json
import math
import sys
import time


def is_digit(c):
    return "0" <= c <= "9"


def is_alpha(c):
    return "a" <= c <= "z" or "A" <= c <= "Z"


def is_space(c):
    return c == " " or "\t" <= c <= "\r"


def lower_ascii(s):
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def trim(s):
    a, b = 0, len(s)
    while a < b and is_space(s[a]):
        a += 1
    while b > a and is_space(s[b - 1]):
        b -= 1
    return s[a:b]


# --- the final answer (final_answer.cc) ---

def last_box(s):
    """Where the content of the last \\boxed{ or \\fbox{ starts, or -1."""
    best, start = -1, -1
    for marker in ("\\boxed{", "\\fbox{"):
        pos = s.rfind(marker)
        if pos >= 0 and (best < 0 or pos > best):
            best, start = pos, pos + len(marker)
    return start


def until_closing_brace(s, start):
    depth = 1
    for i in range(start, len(s)):
        depth += 1 if s[i] == "{" else -1 if s[i] == "}" else 0
        if depth == 0:
            return s[start:i]
    return None


def after_last_marker(s):
    lower = lower_ascii(s)
    best, end = -1, -1
    for marker in ("answer:", "answer is", "####"):
        pos = lower.rfind(marker)
        if pos >= 0 and (best < 0 or pos > best):
            best, end = pos, pos + len(marker)
    return end


def trim_answer(s):
    """Blanks and periods off both ends, except a period that starts a number (".5")."""
    a, b = 0, len(s)
    while a < b and (is_space(s[a]) or (s[a] == "." and not (a + 1 < b and is_digit(s[a + 1])))):
        a += 1
    while b > a and (is_space(s[b - 1]) or s[b - 1] == "."):
        b -= 1
    return s[a:b]


def strip_decoration(s):
    for pair in ("**", "__"):
        while pair in s:
            s = s.replace(pair, "", 1)
    s = trim_answer(s)
    if s.startswith(":"):
        s = trim_answer(s[1:])
    s = trim_answer(s.strip("*"))
    if len(s) >= 2 and s[0] in "$`" and s[-1] == s[0]:
        s = trim_answer(s[1:-1])
    return s


def line_at(s, start):
    nl = s.find("\n", start)
    return s[start:] if nl < 0 else s[start:nl]


def extract_final_answer(response):
    """final_answer.cc: the last box wins, else the last marker's line (or the next line)."""
    box = last_box(response)
    if box >= 0:
        content = until_closing_brace(response, box)
        answer = strip_decoration(content) if content is not None else ""
        return answer or None
    at = after_last_marker(response)
    if at < 0:
        return None
    line = line_at(response, at)
    answer = strip_decoration(line)
    nxt = at + len(line) + 1
    if not answer and nxt < len(response):
        answer = strip_decoration(line_at(response, nxt))
    return answer or None


# --- numbers (numbers.cc) ---

class Number:
    def __init__(self, value, integer=None):
        self.value, self.integer = value, integer


def skip_digits(s, i):
    while i < len(s) and is_digit(s[i]):
        i += 1
    return i


def scan_unsigned(s, i):
    """(end, digits, has_point); end == i when no number starts at i."""
    end = skip_digits(s, i)
    if end == i:
        return i, "", False
    digits = s[i:end]
    groups = end - i <= 3
    while groups and end + 4 <= len(s) and s[end] == "," and skip_digits(s, end + 1) == end + 4:
        digits += s[end + 1:end + 4]
        end += 4
    has_point = False
    if end + 1 < len(s) and s[end] == "." and is_digit(s[end + 1]):
        frac_end = skip_digits(s, end + 1)
        digits += s[end:frac_end]
        end, has_point = frac_end, True
    return end, digits, has_point


def scan_literal(s, i, negative):
    """(end, Number or None)."""
    end, digits, has_point = scan_unsigned(s, i)
    if end == i:
        return i, None
    value = float(digits)
    if end + 1 < len(s) and s[end] == "/" and is_digit(s[end + 1]):
        den_end = skip_digits(s, end + 1)
        den = float(s[end + 1:den_end])
        if den != 0:
            return den_end, Number((-value if negative else value) / den)
    number = Number(-value if negative else value)
    if not has_point:
        canonical = digits.lstrip("0") or "0"
        number.integer = ("-" if negative and canonical != "0" else "") + canonical
    return end, number


def is_suffix(rest):
    rest = rest.lstrip(" \t\n\v\f\r")
    if rest == "%" or not rest:
        return True
    ok = all(is_alpha(c) or is_space(c) or c in "^/" or is_digit(c) for c in rest)
    return ok and is_alpha(rest[0])


def parse_number(text):
    a, b = 0, len(text)
    while a < b and is_space(text[a]):
        a += 1
    while b > a and (is_space(text[b - 1]) or text[b - 1] == "."):
        b -= 1
    text = text[a:b]
    negative = False
    if text and text[0] in "-+":
        negative = text[0] == "-"
        text = text[1:]
    if text and text[0] == "$":
        text = text[1:]
    end, number = scan_literal(text, 0, negative)
    if end == 0 or not is_suffix(text[end:]):
        return None
    if not math.isfinite(number.value) and number.integer is None:
        return None
    return number


def last_number(text):
    last, i = None, 0
    while i < len(text):
        if not (is_digit(text[i]) and (i == 0 or not is_alpha(text[i - 1]))):
            i += 1
            continue
        negative = (i > 0 and text[i - 1] == "-" and
                    (i == 1 or not (is_digit(text[i - 2]) or is_alpha(text[i - 2]))))
        end, number = scan_literal(text, i, negative)
        if number is not None and (math.isfinite(number.value) or number.integer is not None):
            last = number
        i = max(end, i + 1)
        while i < len(text) and (is_digit(text[i]) or is_alpha(text[i])):
            i += 1
    return last


def numbers_equal(a, b, rel, abs_):
    if a.integer is not None and b.integer is not None:
        return a.integer == b.integer
    if not math.isfinite(a.value) or not math.isfinite(b.value):
        return False
    scale = max(abs(a.value), abs(b.value))
    return abs(a.value - b.value) <= max(abs_, rel * scale)


# --- constant expressions (expression.cc) ---

class Evaluator:
    MAX_DEPTH = 64

    def __init__(self, s):
        self.s, self.i, self.depth, self.failed = s, 0, 0, False

    def run(self):
        value = self.expr()
        if self.failed or self.i != len(self.s) or not math.isfinite(value):
            return None
        return value

    def peek(self, c):
        return self.i < len(self.s) and self.s[self.i] == c

    def accept(self, token):
        if self.s[self.i:self.i + len(token)] != token:
            return False
        self.i += len(token)
        return True

    def fail(self):
        self.failed = True
        return 0.0

    def expr(self):
        self.depth += 1
        if self.depth > self.MAX_DEPTH:
            return self.fail()
        value = self.term()
        while not self.failed and (self.peek("+") or self.peek("-")):
            plus = self.s[self.i] == "+"
            self.i += 1
            rhs = self.term()
            value = value + rhs if plus else value - rhs
        self.depth -= 1
        return value

    def starts_factor(self):
        s, i = self.s, self.i
        return (self.peek("(") or s[i:i + 4] == "sqrt" or s[i:i + 2] == "pi" or
                (i < len(s) and (is_digit(s[i]) or s[i] == ".") and i > 0 and s[i - 1] == ")"))

    def term(self):
        value = self.unary()
        while not self.failed:
            if self.peek("*") or self.peek("/"):
                times = self.s[self.i] == "*"
                self.i += 1
                rhs = self.unary()
                if not times and rhs == 0:
                    return self.fail()
                value = value * rhs if times else value / rhs
            elif self.starts_factor():
                value *= self.unary()
            else:
                break
        return value

    def unary(self):
        self.depth += 1
        if self.depth > self.MAX_DEPTH:
            return self.fail()
        if self.peek("-") or self.peek("+"):
            minus = self.s[self.i] == "-"
            self.i += 1
            value = self.unary()
            value = -value if minus else value
        else:
            value = self.primary()
            if not self.failed and self.accept("^"):
                value = c_pow(value, self.unary())
        self.depth -= 1
        return value

    def primary(self):
        root = self.accept("sqrt")
        if self.accept("("):
            value = self.expr()
            if not self.accept(")"):
                return self.fail()
            return c_sqrt(value) if root else value
        if root:
            return self.fail()
        if self.accept("pi"):
            return math.pi
        start = self.i
        while self.i < len(self.s) and (is_digit(self.s[self.i]) or self.s[self.i] == "."):
            self.i += 1
        if self.i == start:
            return self.fail()
        try:
            return float(self.s[start:self.i])
        except ValueError:
            return self.fail()


def c_pow(a, b):  # C's pow: NaN and infinities instead of exceptions
    try:
        return math.pow(a, b)
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        return math.inf if a == 0 else math.nan


def c_sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def evaluate_expression(text):
    return Evaluator(text).run() if text else None


# --- LaTeX-lite (latex.cc) ---

def find_command(s, name, start=0):
    needle = "\\" + name
    pos = s.find(needle, start)
    while pos >= 0:
        end = pos + len(needle)
        if not is_alpha(name[-1]) or end >= len(s) or not is_alpha(s[end]):
            return pos
        pos = s.find(needle, pos + 1)
    return -1


def replace_command(s, name, with_):
    pos = find_command(s, name)
    while pos >= 0:
        s = s[:pos] + with_ + s[pos + len(name) + 1:]
        pos = find_command(s, name, pos + len(with_))
    return s


def replace_all(s, what, with_):
    pos = s.find(what)
    while pos >= 0:
        s = s[:pos] + with_ + s[pos + len(what):]
        pos = s.find(what, pos + len(with_))
    return s


def read_argument(s, pos):
    """(arg, end) or None."""
    while pos < len(s) and is_space(s[pos]):
        pos += 1
    if pos >= len(s):
        return None
    if s[pos] != "{":
        return s[pos], pos + 1
    depth = 0
    for i in range(pos, len(s)):
        if s[i] == "{":
            depth += 1
        if s[i] == "}":
            depth -= 1
            if depth == 0:
                return s[pos + 1:i], i + 1
    return None


def operand(x):
    number = bool(x) and all(is_digit(c) or c == "." for c in x)
    if number or (len(x) == 1 and is_alpha(x[0])):
        return x
    return "(" + x + ")"


def rfind_at_or_before(s, needle, pos):  # C++'s s.rfind(needle, pos)
    return s.rfind(needle, 0, pos + len(needle))


def rewrite_command(s, name, n_args, rewrite):
    needle = "\\" + name
    pos = s.rfind(needle)
    while pos >= 0:
        end = pos + len(name) + 1
        if not (end < len(s) and is_alpha(s[end]) and is_alpha(name[-1])):
            args, ok = ["", ""], True
            for i in range(n_args):
                got = read_argument(s, end)
                if got is None:
                    ok = False
                    break
                args[i], end = got
            if ok:
                s = s[:pos] + rewrite(args[0], args[1]) + s[end:]
        pos = -1 if pos == 0 else rfind_at_or_before(s, needle, pos - 1)
    return s


def rewrite_mixed_numbers(s):
    pos = find_command(s, "frac")
    while pos >= 0:
        first = pos
        while first > 0 and is_digit(s[first - 1]):
            first -= 1
        skip = first == pos or (first > 0 and (s[first - 1] == "." or is_alpha(s[first - 1])))
        a = b = None
        if not skip:
            a = read_argument(s, pos + 5)
            b = read_argument(s, a[1]) if a else None
        if not skip and a and b:
            (a, _), (b, end) = a, b
            if operand(a) == a and operand(b) == b and "." not in a:
                mixed = "(" + s[first:pos] + "+" + a + "/" + b + ")"
                s = s[:first] + mixed + s[end:]
                pos = first + len(mixed) - 1
        pos = find_command(s, "frac", pos + 1)
    return s


def rewrite_powers(s):
    out, i = [], 0
    while i < len(s):
        out.append(s[i])
        if s[i] == "^" and i + 1 < len(s) and s[i + 1] == "{":
            got = read_argument(s, i + 1)
            if got is not None:
                out.append(operand(got[0]))
                i = got[1] - 1
        i += 1
    return "".join(out)


def remove_spacing(s):
    for name in ("left", "right", "displaystyle", "!", ",", ";", ":", " "):
        s = replace_command(s, name, "")
    for degree in ("^{\\circ}", "^\\circ", "\\circ", "\\degree"):
        s = replace_all(s, degree, "")
    for what, with_ in (("\\$", ""), ("$", ""), ("\\{", "{"), ("\\}", "}"), ("{,}", ","),
                        ("\\%", "%")):
        s = replace_all(s, what, with_)
    for name, with_ in (("cdot", "*"), ("times", "*"), ("pi", "pi")):
        s = replace_command(s, name, with_)
    return s


def normalize_latex(text):
    s = remove_spacing(text)
    for name in ("text", "textbf", "mathrm", "mbox", "textrm", "mathbf"):
        s = rewrite_command(s, name, 1, lambda x, _: x)
    s = replace_command(s, "dfrac", "\\frac")
    s = replace_command(s, "tfrac", "\\frac")
    s = rewrite_mixed_numbers(s)
    s = rewrite_command(s, "frac", 2, lambda a, b: operand(a) + "/" + operand(b))
    s = replace_all(s, "\\sqrt[", "\\root[")
    s = rewrite_command(s, "sqrt", 1, lambda x, _: "sqrt(" + x + ")")
    s = rewrite_powers(s)
    out = lower_ascii("".join(c for c in s if not (is_space(c) or c in "{}")))
    return out.rstrip(".")


# --- the numeric verifier (verifiers.cc) ---

def math_number(normalized):
    literal = parse_number(normalized)
    value = evaluate_expression(normalized)
    if value is None:
        return literal
    evaluated = Number(value)
    if literal is not None and literal.integer is not None and \
            numbers_equal(evaluated, literal, 1e-12, 0):
        return literal
    return evaluated


def numeric_candidate(response):
    marked = extract_final_answer(response)
    if marked is not None:
        for read in (parse_number, lambda m: math_number(normalize_latex(m)), last_number):
            number = read(marked)
            if number is not None:
                return number
    return last_number(response)


def reference_texts(answer):
    def one(v):
        if isinstance(v, bool):
            return None
        if isinstance(v, str):
            return v
        if isinstance(v, (int, float)):
            return json.dumps(v)
        return None
    if not isinstance(answer, list):
        text = one(answer)
        if text is not None:
            return [text]
    else:
        texts = [one(v) for v in answer]
        if texts and all(t is not None for t in texts):
            return texts
    raise ValueError("answer: must be a string, a number or a non-empty list of them")


def score(response, answer, rel=1e-6, abs_=0.0):
    """1.0 or 0.0; ValueError for a reference that is not a number."""
    got = numeric_candidate(response)
    for ref in reference_texts(answer):
        want = parse_number(ref)
        if want is None:
            want = math_number(normalize_latex(ref))
        if want is None:
            raise ValueError('answer: "%s" is not a number' % ref)
        if got is not None and numbers_equal(got, want, rel, abs_):
            return 1.0
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--relative-tolerance", type=float, default=1e-6)
    ap.add_argument("--absolute-tolerance", type=float, default=0.0)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    args = ap.parse_args()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if args.sleep_ms > 0:
            time.sleep(args.sleep_ms / 1000)
        try:
            reward = score(request["response"], request["answer"], args.relative_tolerance,
                           args.absolute_tolerance)
        except ValueError as e:
            print("numeric_reward: %s: %s" % (request["id"], e), file=sys.stderr)
            reward = None
        print(json.dumps({"id": request["id"], "reward": reward}), flush=True)


if __name__ == "__main__":
    main()
