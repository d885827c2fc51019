"""The answer extractors of the round's evaluation scripts, which differ between the two benchmarks.

deepseek-r1 (language/deepseek-r1/eval_accuracy.py) reads the plain decoded text. gpt-oss-120b
(language/gpt-oss-120b/eval_accuracy.py, which eval_mlperf_accuracy.py imports) reads text in OpenAI's Harmony
format, decoded with its special tokens: a reasoning section `<|channel|>analysis<|message|>...` and the answer in
`<|channel|>final<|message|>...<|return|>`. Its multiple-choice and code extractors look in that final section
first; its AIME and MATH extractors are the same as deepseek-r1's.

- multiple choice (GPQA A-D, MMLU-Pro A-J). deepseek-r1: the last `ANSWER`/`FINAL ANSWER` letter; for
  MMLU-Pro else the last standalone letter. gpt-oss-120b: in the final section a letter at its start, else the
  first `Answer: X`; then deepseek-r1's rule on the whole text (MMLU-Pro's standalone letter: final section only).
- code (LiveCodeBench). deepseek-r1: the FIRST ```` ```python ```` block. gpt-oss-120b: the LAST ```` ```python ````
  block of the final section, else its last plain ```` ``` ```` block; then the same in the whole text.
- AIME, both: the last `\\boxed{<digits>}`, else the last `Answer: <digits>`; an integer 0..999.
- MATH-500, both: the brace-matched content of the last `\\boxed{`.

Every extractor first turns a missing text (None, NaN) into "" and strips the text, as the scripts'
validate_text_input does, and returns None where it finds nothing.
"""
from __future__ import annotations

import math
import re
from typing import Any

# The scripts read literal backslash sequences of a list repr as the characters they stand for.
_ESCAPES = ((r"\n", "\n"), (r"\'", "'"))
_LIST_REPR_STARTS, _LIST_REPR_ENDS = ("['", '["'), ("']", '"]')

HARMONY_FINAL = r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)"   # tolerates junk after "final"
MARKDOWN_BOLD = r"\*\*([^*]+)\*\*"
BOXED_OPENING = "\\boxed{"
AIME_BOXED = r"\\boxed{\s*(\d+)\s*}"
AIME_ANSWER_LINE = r"Answer:\s*(\d+)(?!\.)\b"
AIME_RANGE = range(0, 1000)
PYTHON_BLOCK = r"```python(.*?)```"
PLAIN_BLOCK = r"```(.*?)```"
LANGUAGE_TAG = r"^(?:python|py)\s*\n"


def clean_text(text: Any) -> str:
    """validate_text_input: "" for None or NaN, else the text stripped."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    return str(text).strip()


def _unescape(text: str) -> str:
    for escaped, character in _ESCAPES:
        text = text.replace(escaped, character)
    return text


def _answer_keyword_pattern(last_option: str) -> str:
    """`ANSWER` or `FINAL ANSWER`, an optional `:`/`=`, the letter (in optional parentheses), then no letter."""
    return (rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([A-{last_option}])\s*\)?)"
            r"(?:\s*$|[^A-Za-z])")


def _last_group(pattern: str, text: str, flags: int = 0) -> str | None:
    matches = list(re.finditer(pattern, text, flags))
    return matches[-1].group(1) if matches else None


def _strip_list_repr(text: str) -> str:
    if text.startswith(_LIST_REPR_STARTS) and text.endswith(_LIST_REPR_ENDS):
        return text[2:-2].strip()
    return text


# -- shared by both benchmarks ----------------------------------------------------------------------

def boxed_answer(text: Any) -> str | None:
    """parse_boxed_math: the content of the last `\\boxed{`, up to its matching brace, stripped; None without one
    or when the brace never closes."""
    text = clean_text(text)
    start = text.rfind(BOXED_OPENING)
    if not text or start == -1:
        return None
    depth = 0
    content = start + len(BOXED_OPENING)
    for position in range(content, len(text)):
        character = text[position]
        if character == "{":
            depth += 1
        elif character == "}":
            if depth == 0:
                return text[content:position].strip()
            depth -= 1
    return None


def aime_answer(text: Any) -> int | None:
    """parse_aime_answer: the digits of the last `\\boxed{<digits>}`, else of the last `Answer: <digits>` (any
    case, not followed by a decimal point); None unless they make an integer 0..999."""
    text = clean_text(text)
    if not text:
        return None
    digits = _last_group(AIME_BOXED, text)
    if digits is None:
        digits = _last_group(AIME_ANSWER_LINE, text, re.IGNORECASE | re.MULTILINE)
    if digits is None:
        return None
    value = int(digits)
    return value if value in AIME_RANGE else None


# -- deepseek-r1 ------------------------------------------------------------------------------------

def deepseek_multiple_choice(text: Any, last_option: str) -> str | None:
    """deepseek-r1's parse_multiple_choice (last_option "D" for GPQA, "J" for MMLU-Pro): the letter of the last
    `ANSWER`/`FINAL ANSWER` in any case; for MMLU-Pro, else the last standalone letter A-J."""
    text = clean_text(text)
    if not text:
        return None
    text = _unescape(_strip_list_repr(text))
    letter = _last_group(_answer_keyword_pattern(last_option), text, re.IGNORECASE)
    if letter is None and last_option == "J":
        letter = _last_group(r"\b([A-J])\b", text, re.IGNORECASE)
    return letter.upper() if letter is not None else None


def deepseek_code(text: Any) -> str | None:
    """deepseek-r1's parse_code: the content of the FIRST ```` ```python ```` block, stripped."""
    text = clean_text(text)
    match = re.search(PYTHON_BLOCK, text, re.DOTALL) if text else None
    return match.group(1).strip() if match else None


# -- gpt-oss-120b -----------------------------------------------------------------------------------

def harmony_final_section(text: Any) -> str:
    """extract_final_section: the stripped text of the first Harmony final channel (up to `<|return|>` or the
    end), or the whole (stripped) text when there is none."""
    text = clean_text(text)
    if not text:
        return ""
    match = re.search(HARMONY_FINAL, text, re.DOTALL)
    return match.group(1).strip() if match else text


def gpt_oss_multiple_choice(text: Any, last_option: str) -> str | None:
    """gpt-oss-120b's parse_multiple_choice (last_option "D" for GPQA, "J" for MMLU-Pro), in this order: a
    letter at the start of the final section (after non-letters, followed by a non-letter), the first
    `Answer X` / `Answer: X` / `Answer. X` in it, the last `ANSWER`/`FINAL ANSWER` letter of the whole text, and
    for MMLU-Pro the last standalone letter of the final section. Letters of any case, returned upper-case;
    markdown bold is removed from the final section first."""
    text = clean_text(text)
    if not text:
        return None
    final = re.sub(MARKDOWN_BOLD, r"\1", harmony_final_section(text))
    final = _unescape(_strip_list_repr(final))
    letters = rf"[A-{last_option}]"
    leading = re.match(rf"^[^a-zA-Z]*({letters})(?:[^a-zA-Z]|$)", final.strip(), re.IGNORECASE)
    if leading:
        return leading.group(1).upper()
    answer = re.search(rf"\b(?:Answer|ANSWER)\s*[:.]?\s*({letters})\b", final, re.IGNORECASE)
    if answer:
        return answer.group(1).upper()
    letter = _last_group(_answer_keyword_pattern(last_option), _unescape(text), re.IGNORECASE)
    if letter is None and last_option == "J":
        letter = _last_group(rf"\b({letters})\b", final, re.IGNORECASE)
    return letter.upper() if letter is not None else None


def _last_code_block(text: str) -> str | None:
    """The last ```` ```python ```` block, else the last plain ```` ``` ```` block without its language tag."""
    python = _last_group(PYTHON_BLOCK, text, re.DOTALL)
    if python is not None:
        return python.strip()
    plain = _last_group(PLAIN_BLOCK, text, re.DOTALL)
    if plain is not None:
        return re.sub(LANGUAGE_TAG, "", plain.strip(), flags=re.IGNORECASE)
    return None


def gpt_oss_code(text: Any) -> str | None:
    """gpt-oss-120b's parse_code: the LAST code block of the Harmony final section, else of the whole text
    (```` ```python ```` blocks before plain ones, each time)."""
    text = clean_text(text)
    if not text:
        return None
    final = harmony_final_section(text)
    if final != text:
        code = _last_code_block(final)
        if code is not None:
            return code
    return _last_code_block(text)
