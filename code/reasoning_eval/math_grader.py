"""MATH-500's check, as both evaluation scripts make it: PRM800K's `grade_answer` (github.com/openai/prm800k,
prm800k/grading/grader.py and math_normalize.py, the reference's submodule at 7ecc794).

An answer is correct when
1. the MATH normalisation (Hendrycks' `math_equivalence`: `\\dfrac`/`\\tfrac` to `\\frac`, `\\frac12` to
   `\\frac{1}{2}`, `0.5` to `\\frac{1}{2}`, `a/b` to `\\frac{a}{b}`, no `\\left`/`\\right`, degrees, dollars,
   percent, units after `\\text{ `, a short `k = ` prefix, spaces) makes the two strings equal, or
2. PRM800K's own normalisation (units and words like `million` stripped, LaTeX turned into text by pylatexenc,
   lower case, integers written plainly) makes them equal, or
3. element by element (tuples and intervals split at their commas, the brackets compared), each pair is equal
   as sympy simplifies their difference to 0 - except that two plain fractions must be written the same (so an
   unreduced fraction is wrong) and an integer is never equal to a non-integer.

sympy's parser evaluates the expression as Python, as the grader's does; the grader lets it see only
expressions of at most two distinct letters, which leaves no name to call. Every quirk of the original is kept
(e.g. a float within 1e-7 of an integer counts as that integer truncated), so that the figures agree.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# -- MATH's normalisation (math_normalize.py) -------------------------------------------------------

TEXT_WRAPPER = r"^\\text\{(?P<text>.+?)\}$"
UNITS_MARKER = "\\text{ "          # in MATH, "\text{ " only ever introduces units on the right
# Replacements in order, before the units are cut.
MATHD_BEFORE_UNITS = (("\n", ""), ("\\!", ""), ("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"),
                      ("\\left", ""), ("\\right", ""), ("^{\\circ}", ""), ("^\\circ", ""), ("\\$", ""))
MATHD_AFTER_UNITS = (("\\%", ""), (" .", " 0."), ("{.", "{0."))
ONE_HALF = "\\frac{1}{2}"


class _Unparsable(Exception):
    """The MATH normalisation gave up on the answer (it is then compared as it was written)."""


def _fix_sqrt(text: str) -> str:
    """`\\sqrt3` -> `\\sqrt{3}` (one character)."""
    if "\\sqrt" not in text:
        return text
    first, *rest = text.split("\\sqrt")
    pieces = [first]
    for piece in rest:
        if not piece:
            raise _Unparsable("\\sqrt at the end")
        pieces.append("\\sqrt" + (piece if piece[0] == "{" else "{" + piece[0] + "}" + piece[1:]))
    return "".join(pieces)


def _fix_fracs(text: str) -> str:
    """`\\frac12` -> `\\frac{1}{2}`, `\\frac1{72}` -> `\\frac{1}{72}` (one-character operands braced)."""
    first, *rest = text.split("\\frac")
    pieces = [first]
    for piece in rest:
        if not piece:
            raise _Unparsable("\\frac at the end")
        if piece[0] == "{":
            pieces.append("\\frac" + piece)
            continue
        if len(piece) < 2:
            return text
        numerator, second, tail = piece[0], piece[1], piece[2:]
        denominator = second if second == "{" else "{" + second + "}"
        pieces.append("\\frac{" + numerator + "}" + denominator + tail)
    return "".join(pieces)


def _fix_a_slash_b(text: str) -> str:
    """`3/4` -> `\\frac{3}{4}`, only for two integers written exactly as Python writes them."""
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        numerator, denominator = int(parts[0]), int(parts[1])
    except ValueError:
        return text
    if text != f"{numerator}/{denominator}":
        return text
    return "\\frac{" + str(numerator) + "}{" + str(denominator) + "}"


def _strip_mathd(text: str) -> str:
    for old, new in MATHD_BEFORE_UNITS:
        text = text.replace(old, new)
    if UNITS_MARKER in text:
        parts = text.split(UNITS_MARKER)
        if len(parts) != 2:
            raise _Unparsable("more than one \\text{ ")
        text = parts[0]
    for old, new in MATHD_AFTER_UNITS:
        text = text.replace(old, new)
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:      # "k = 3" -> "3"
        text = sides[1]
    text = _fix_sqrt(text).replace(" ", "")
    text = _fix_fracs(text)
    if text == "0.5":
        text = ONE_HALF
    return _fix_a_slash_b(text)


def mathd_normalize(answer: str | None) -> str | None:
    """math_normalize.normalize_answer: stripped, an enclosing `\\text{...}` removed, then MATH's normalisation;
    where that gives up, the answer as it stood."""
    if answer is None:
        return None
    answer = answer.strip()
    wrapped = re.search(TEXT_WRAPPER, answer)
    if wrapped is not None:
        answer = wrapped.group("text").strip()
    try:
        return _strip_mathd(answer)
    except (_Unparsable, IndexError):
        return answer


# -- PRM800K's normalisation (grader.py) ------------------------------------------------------------

BEFORE_WORDS = (("\\%", "%"), ("\\$", "$"), ("$", ""), ("%", ""), (" or ", " , "), (" and ", " , "),
                ("million", "*10^6"), ("billion", "*10^9"), ("trillion", "*10^12"))
UNITS = ("degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day", "week", "month",
         "year", "foot", "feet", "inch", "yard")
DEGREE_SIGN = r"\^ *\\circ"
THIN_SPACE_AFTER_COMMA = r",\\! *"
UNICODE_TO_SYMPY = (("√", "sqrt"), ("π", "pi"), ("∞", "inf"), ("∪", "U"), ("·", "*"), ("×", "*"))
PROPER_THOUSANDS = r"(\d)(,)(\d\d\d)($|\D)"
MIXED_NUMBER = r"([0-9]) +([0-9])"
PLAIN_FRACTION = r"^-?[0-9]+.?/0*[1-9][0-9]*.?$"
TUPLE_CHARS = "()[]"
# sympy may hang on these: never evaluated.
SYMPY_REFUSED_SUBSTRINGS = ("^{", "^(")
SYMPY_REFUSED_PATTERNS = (r"\^[0-9]+\^", r"\^[0-9][0-9]+")
MAX_UNKNOWN_LETTERS = 2
INTEGER_TOLERANCE = 1e-7


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_int(value: float) -> bool:
    try:
        return abs(value - int(round(value))) <= INTEGER_TOLERANCE
    except (OverflowError, ValueError):     # inf, nan
        return False


def _strip_thousands_commas(text: str) -> str:
    """`1,234,567` -> `1234567`, leaving tuple commas (`1,2`) alone."""
    while True:
        stripped = re.sub(PROPER_THOUSANDS, r"\1\3\4", text)
        if stripped == text:
            return stripped
        text = stripped


def _text_is_int(text: str) -> bool:
    try:
        return _is_int(float(_strip_thousands_commas(text)))
    except ValueError:
        return False


def _text_to_int(text: str) -> int:
    return int(float(text.replace(",", "")))       # truncates, as the grader does


@lru_cache(maxsize=1)
def _latex_to_text() -> Any:
    import logging

    from pylatexenc import latex2text   # type: ignore[import-untyped]

    # It warns on every malformed \\frac of a model's answer ("macro '\\frac' failed its substitution!"); the
    # text it returns is the same either way.
    logging.getLogger("pylatexenc").setLevel(logging.ERROR)
    return latex2text.LatexNodes2Text()


def _latex_as_sympy_text(expression: str, converter: Any) -> str:
    expression = expression.replace("\\tfrac", "\\frac").replace("\\dfrac", "\\frac")
    expression = expression.replace("\\frac", " \\frac")      # keeps a mixed number's parts apart
    expression = converter.latex_to_text(expression)
    for old, new in UNICODE_TO_SYMPY:
        expression = expression.replace(old, new)
    return expression.strip()


def prm_normalize(expression: str | None) -> str | None:
    """grader._normalize: PRM800K's normalisation of an answer, lower-cased and without spaces or braces."""
    if expression is None:
        return None
    wrapped = re.search(TEXT_WRAPPER, expression)
    if wrapped is not None:
        expression = wrapped.group("text")
    for old, new in BEFORE_WORDS:
        expression = expression.replace(old, new)
    for unit in UNITS:
        expression = re.sub(f"{unit}(es)?(s)? *(\\^[0-9]+)?", "", expression)
    expression = re.sub(DEGREE_SIGN, "", expression)
    if expression and expression[0] == "{" and expression[-1] == "}":
        expression = expression[1:-1]
    expression = re.sub(THIN_SPACE_AFTER_COMMA, "", expression)
    if _is_float(expression) and _is_int(float(expression)):
        expression = str(int(round(float(expression))))
    if "\\" in expression:
        converter = _latex_to_text()       # outside the try: a missing pylatexenc must not pass for bad LaTeX
        try:
            expression = _latex_as_sympy_text(expression, converter)
        except Exception:   # the grader keeps the LaTeX where pylatexenc fails on it
            pass
    expression = re.sub("- *", "-", expression)
    expression = re.sub(MIXED_NUMBER, r"\1+\2", expression)         # "7 3/4" -> "7+3/4"
    expression = expression.replace(" ", "").replace("{", "").replace("}", "").lower()
    if _text_is_int(expression):
        expression = str(_text_to_int(expression))
    return expression


def _sympy_may_evaluate(expression: str) -> bool:
    letters = {c for c in expression.replace("sqrt", "").replace("frac", "") if c.isalpha()}
    if len(letters) > MAX_UNKNOWN_LETTERS:
        return False
    if any(bad in expression for bad in SYMPY_REFUSED_SUBSTRINGS):
        return False
    return not any(re.search(pattern, expression) for pattern in SYMPY_REFUSED_PATTERNS)


def equal_under_sympy(ground_truth: str, given: str) -> bool:
    """Whether sympy simplifies `(ground_truth)-(given)` to 0 (parsed with implicit multiplication, `^` as
    power); False for what it refuses or cannot parse."""
    import sympy
    from sympy.parsing import sympy_parser

    difference = f"({ground_truth})-({given})"
    if not _sympy_may_evaluate(difference):
        return False
    transformations = sympy_parser.standard_transformations + (sympy_parser.implicit_multiplication_application,)
    try:
        parsed = sympy_parser.parse_expr(difference.replace("^", "**"), transformations=transformations)
        return bool(sympy.simplify(parsed) == 0)
    except Exception:       # the grader counts whatever sympy raises as "not equal"
        return False


def split_elements(expression: str) -> list[str]:
    """A tuple or interval's elements (`(1,2]` -> ["1", "2"]); any other expression is one element."""
    expression = _strip_thousands_commas(expression)
    if not expression:
        return []
    inner = expression[1:-1]
    if (len(expression) > 2 and expression[0] in TUPLE_CHARS and expression[-1] in TUPLE_CHARS
            and not any(c in inner for c in TUPLE_CHARS)):
        return [element.strip() for element in inner.split(",")]
    return [expression]


def _elements_equal(ground_truth: str, given: str) -> bool:
    if re.search(PLAIN_FRACTION, ground_truth) and re.search(PLAIN_FRACTION, given):
        return ground_truth == given          # an unreduced fraction is not the answer
    if _text_is_int(ground_truth) != _text_is_int(given):
        return False                          # an integer answer needs an integer
    return equal_under_sympy(ground_truth, given)


def grade_answer(given_answer: str | None, ground_truth: str) -> bool:
    """PRM800K's grade_answer(given_answer, ground_truth)."""
    if given_answer is None:
        return False
    if mathd_normalize(ground_truth) == mathd_normalize(given_answer):
        return True
    truth, given = prm_normalize(ground_truth), prm_normalize(given_answer)
    if truth is None or given is None:
        return False
    if truth == given:
        return True
    if not given:
        return False
    truth_elements, given_elements = split_elements(truth), split_elements(given)
    if len(truth_elements) > 1 and (truth[0] != given[0] or truth[-1] != given[-1]):
        return False          # (a,b) is not [a,b]
    if len(truth_elements) != len(given_elements):
        return False
    return all(_elements_equal(t, g) for t, g in zip(truth_elements, given_elements))
