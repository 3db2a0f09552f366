// What the built-in verifiers (verifiers.h) read in a response besides its final answer
// (final_answer.h), and the normalisations they compare answers after. No LibTorch, no locale:
// every rule works on bytes and only ASCII is folded, so any byte string (non-UTF-8 included) is
// a valid input and nothing here throws.
//
// Examples:
//   last_math_segment("so $x = \\frac{1}{2}$ here")          -> "x = \\frac{1}{2}"
//   normalize_text("  The  Cat. ")                           -> "the cat"
//   normalize_latex("\\left( \\dfrac{1}{2} \\right)")        -> "(1/2)"
//   parse_number("1,234.5 cm") -> 1234.5; parse_number("-3/4") -> -0.75; ("50%") -> 50
//   evaluate_expression("sqrt(2)/2") -> 0.7071...
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tlt::reward {

// The content of the last math segment of `response` (`$...$`, `$$...$$`, `\(...\)` or
// `\[...\]`: whichever closes last), or nullopt when there is none or it is blank.
std::optional<std::string> last_math_segment(std::string_view response);

// Trimmed, whitespace runs collapsed to one space, ASCII letters lower-cased, trailing periods
// removed: what `exact` compares.
std::string normalize_text(std::string_view text);

// LaTeX-lite: removes `$` and `\$`, `\left`, `\right`, `\!`, `\,`, `\;`, `\:`, `\ `,
// `\displaystyle`, degree marks, `\text{X}` (and \textbf, \mathrm, \mbox) -> X; `\dfrac`/`\tfrac`
// -> `\frac`;
// `\frac{a}{b}` and `\frac12` -> `a/b` (operands other than a number or a letter are
// parenthesised); a mixed number `2\frac{1}{2}` -> `(2+1/2)`; `\{`, `\}` -> braces;
// `\sqrt{x}` -> `sqrt(x)`; `^{x}` -> `^x` or `^(x)`; `\cdot`, `\times` -> `*`; `\%` -> `%`;
// `{,}` -> `,`; then every space is removed, ASCII letters lower-cased and trailing periods
// stripped.
std::string normalize_latex(std::string_view text);

// A number literal with the decorations answers carry, or nullopt when `text` is not one:
// an optional sign, digits with optional thousands separators (`1,234,567`: groups of exactly
// three), an optional decimal part, or a fraction `a/b` (b != 0); around it an optional `$`
// currency sign, a trailing `%` (read as the number itself: "50%" is 50), a trailing unit of
// letters (`12 cm`, `5 apples`, `100 km/h`) and trailing periods. `integer` holds the canonical
// digits of an integer literal (sign included, leading zeros dropped), compared exactly however
// long.
struct Number {
  double value = 0;
  std::optional<std::string> integer;
};
std::optional<Number> parse_number(std::string_view text);

// The last number literal in `text` (an optionally signed integer, decimal, thousands-separated
// number or `a/b` fraction), or nullopt when there is none.
std::optional<Number> last_number(std::string_view text);

// The value of a constant arithmetic expression in normalize_latex's output: numbers, `+ - * /`,
// `^`, parentheses, `sqrt(...)`, `pi`, implicit multiplication (`2sqrt(3)`, `3pi`). nullopt for
// anything else (a variable, an unbalanced parenthesis, division by zero, a non-finite result).
std::optional<double> evaluate_expression(std::string_view text);

// Whether two numbers are equal: integer literals exactly, otherwise
// |a - b| <= max(absolute_tolerance, relative_tolerance * max(|a|, |b|)).
bool numbers_equal(const Number& a, const Number& b, double relative_tolerance,
                   double absolute_tolerance);

}  // namespace tlt::reward
