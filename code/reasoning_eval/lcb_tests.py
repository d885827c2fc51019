"""The tests a LiveCodeBench solution is graded on.

The official scripts grade against the problem's public and private tests of LiveCodeBench's
`code_generation_lite` data (the user brings it: release_v1 for deepseek-r1, release_v6 for gpt-oss-120b), looked
up by `question_id` (the rows' ground truth). Its columns: `public_test_cases` (a JSON list of
{input, output, testtype}), `private_test_cases` (the same JSON, or - in most problems - that JSON as a pickled
string, zlib-compressed, base64-encoded) and `metadata` (JSON; `func_name` names the method of a functional,
LeetCode-style problem; without it the tests are stdin tests).

The pickle is read by an unpickler that resolves no class or function at all, so it can rebuild only plain
values (the str it holds) and cannot run code: unpickling untrusted data is unsafe because of the callables a
pickle may name, and this one may name none. Its result must be a str, read as JSON.

Where no tests are given, the problem statement's own examples are the tests (LeetCode's `Input: a = ...,
b = ...` / `Output: ...`, AtCoder's `Sample Input N` / `Sample Output N`); `ProblemTests.source` then says so, and
a score from them is not the official one.
"""
from __future__ import annotations

import ast
import base64
import binascii
import io
import json
import pickle
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..common.errors import EXIT_FAILURE, UserError

SOURCE_OFFICIAL = "LiveCodeBench public and private tests"
SOURCE_PUBLIC_ONLY = "LiveCodeBench public tests only"
SOURCE_STATEMENT = "the problem statement's examples only, not the official hidden tests"
MAX_DECODED_BYTES = 2 << 30            # a corrupt or hostile column cannot fill the memory
TEST_TYPES = ("stdin", "functional")


@dataclass(frozen=True)
class LcbTest:
    input: str                 # functional: one JSON value per line, the method's arguments in order
    output: str                # functional: the JSON of the return value; stdin: the expected output text
    kind: str                  # "stdin" or "functional"


@dataclass(frozen=True)
class ProblemTests:
    question_id: str
    tests: tuple[LcbTest, ...]
    method: str | None         # the method functional tests call; None: stdin tests
    source: str                # SOURCE_OFFICIAL, SOURCE_PUBLIC_ONLY or SOURCE_STATEMENT

    @property
    def official(self) -> bool:
        return self.source == SOURCE_OFFICIAL


class _PlainValuesOnly(pickle.Unpickler):
    """An unpickler that refuses every global: what it rebuilds can hold no class and call no function."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the test data names {module}.{name}; only plain values are accepted")


def _decompress(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, MAX_DECODED_BYTES)
    if inflater.unconsumed_tail:
        raise ValueError(f"the tests decompress to more than {MAX_DECODED_BYTES} bytes")
    return out


def decode_test_cases(value: Any, question_id: str = "?") -> list[dict[str, Any]]:
    """A `public_test_cases`/`private_test_cases` value as its list of {input, output, testtype}: JSON text,
    or base64(zlib(pickle(JSON text))) as the private tests mostly are, or an already decoded list."""
    if isinstance(value, list):
        cases = value
    else:
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            cases = json.loads(text)
        except ValueError:
            try:
                pickled = _decompress(base64.b64decode(text.encode("utf-8"), validate=False))
                unpickled = _PlainValuesOnly(io.BytesIO(pickled)).load()
                if not isinstance(unpickled, str):
                    raise ValueError(f"the pickle holds a {type(unpickled).__name__}, not the tests' JSON text")
                cases = json.loads(unpickled)
            except (ValueError, binascii.Error, zlib.error, pickle.UnpicklingError, EOFError) as error:
                raise UserError(f"LiveCodeBench problem {question_id}: its test cases are neither JSON nor "
                                f"base64(zlib(pickle(JSON))): {error}", exit_code=EXIT_FAILURE) from None
    if not isinstance(cases, list) or not all(isinstance(c, dict) and {"input", "output"} <= c.keys()
                                              for c in cases):
        raise UserError(f"LiveCodeBench problem {question_id}: test cases must be a list of "
                        f"{{input, output, testtype}}", exit_code=EXIT_FAILURE)
    return cases


def _metadata(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if value in (None, ""):
        return {}
    parsed = json.loads(value)
    return parsed if isinstance(parsed, dict) else {}


def lcb_problem_tests(problem: Mapping[str, Any]) -> ProblemTests:
    """The tests of one `code_generation_lite` row, public first, as lcb_runner orders them."""
    question_id = str(problem.get("question_id", "?"))
    public = decode_test_cases(problem.get("public_test_cases") or "[]", question_id)
    private_value = problem.get("private_test_cases")
    private = decode_test_cases(private_value, question_id) if private_value not in (None, "") else []
    cases = [LcbTest(str(c["input"]), str(c["output"]), str(c.get("testtype", "stdin"))) for c in public + private]
    if not cases:
        raise UserError(f"LiveCodeBench problem {question_id} has no test cases", exit_code=EXIT_FAILURE)
    method = _metadata(problem.get("metadata")).get("func_name")
    return ProblemTests(question_id, tuple(cases), method, SOURCE_OFFICIAL if private else SOURCE_PUBLIC_ONLY)


# -- the statement's examples ----------------------------------------------------------------------

LEETCODE_EXAMPLE = re.compile(r"^\s*Input:\s*(?P<input>.+?)\s*\n\s*Output:\s*(?P<output>.+?)\s*$", re.MULTILINE)
ARGUMENT_NAME = re.compile(r"(?P<name>[A-Za-z_]\w*)\s*=\s*")
ATCODER_EXAMPLE = re.compile(r"Sample Input (?P<n>\d+)\s*\n(?P<input>.*?)\n\s*\n\s*Sample Output (?P=n)\s*\n"
                             r"(?P<output>.*?)(?:\n\s*\n|\Z)", re.DOTALL)
STARTER_IN_PROMPT = re.compile(r"```python\n(?P<code>class Solution:.*?)\n```", re.DOTALL)


def _method_of(starter_code: str) -> tuple[str, list[str]] | None:
    """The name and parameters (without self) of the starter code's method in `class Solution`."""
    try:
        tree = ast.parse(starter_code.rstrip() + "\n" + " " * 8 + "pass\n")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            return node.name, [a.arg for a in node.args.args if a.arg != "self"]
    return None


def _json_or_none(text: str) -> str | None:
    text = text.strip().rstrip(",").strip()
    try:
        json.loads(text)
    except ValueError:
        return None
    return text


def _top_level_parts(text: str) -> list[str]:
    """`a = [1,2], s = "x, y = z"` split at the commas outside brackets and string literals."""
    parts, depth, quote, start, escaped = [], 0, "", 0, False
    for position, character in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character == quote:
                quote = ""
        elif character in "\"'":
            quote = character
        elif character in "[{(":
            depth += 1
        elif character in "]})":
            depth -= 1
        elif character == "," and depth == 0:
            parts.append(text[start:position])
            start = position + 1
    parts.append(text[start:])
    return parts


def _leetcode_arguments(text: str, parameters: list[str]) -> list[str] | None:
    """The example's argument values as JSON texts, in the method's parameter order."""
    values: dict[str, str] = {}
    for part in _top_level_parts(text):
        named = ARGUMENT_NAME.match(part.strip())
        if named is None:
            return None
        value = _json_or_none(part.strip()[named.end():])
        if value is None:
            return None
        values[named.group("name")] = value
    order = parameters if set(parameters) == set(values) else list(values)
    return [values[name] for name in order]


def statement_example_tests(question_id: str, statement: str, starter_code: str = "") -> ProblemTests:
    """The examples of a problem statement as tests: functional ones where the starter code has a
    `class Solution` method, stdin ones otherwise. UserError when the statement has none it can read."""
    if not starter_code:
        found = STARTER_IN_PROMPT.search(statement)
        starter_code = found.group("code") if found else ""
    method = _method_of(starter_code) if starter_code.strip() else None
    cases: list[LcbTest] = []
    if method is not None:
        name, parameters = method
        for example in LEETCODE_EXAMPLE.finditer(statement):
            arguments = _leetcode_arguments(example.group("input"), parameters)
            output = _json_or_none(example.group("output"))
            if arguments is not None and output is not None:
                cases.append(LcbTest("\n".join(arguments), output, "functional"))
    else:
        name = None
        for example in ATCODER_EXAMPLE.finditer(statement):
            cases.append(LcbTest(example.group("input").strip() + "\n", example.group("output").strip() + "\n",
                                  "stdin"))
    if not cases:
        raise UserError(f"LiveCodeBench problem {question_id}: no tests were given and its statement has no "
                        f"examples this scorer can read; bring LiveCodeBench's code_generation_lite data "
                        f"(its public_test_cases and private_test_cases)", exit_code=EXIT_FAILURE)
    return ProblemTests(question_id, tuple(cases), name, SOURCE_STATEMENT)


# -- the data set the user brings ------------------------------------------------------------------

LCB_DATASET_URL = "https://huggingface.co/datasets/livecodebench/code_generation_lite"
# code_generation_lite's releases, each the files of all earlier ones plus its own (its loading script).
RELEASE_FILES = {f"release_v{n}": tuple(["test.jsonl"] + [f"test{k}.jsonl" for k in range(2, n + 1)])
                 for n in range(1, 7)}
OFFICIAL_RELEASES = {"deepseek-r1": "release_v1", "gpt-oss-120b": "release_v6"}


def load_lcb_problems(folder: Path, release: str, question_ids: Iterable[str] | None = None
                      ) -> dict[str, dict[str, Any]]:
    """The code_generation_lite rows of `release` (its test*.jsonl files in `folder`), by question_id; only
    those of `question_ids` where given (the files hold hundreds of MB of tests)."""
    if release not in RELEASE_FILES:
        raise UserError(f"Unknown LiveCodeBench release {release!r}; known: {', '.join(RELEASE_FILES)}.")
    missing = [name for name in RELEASE_FILES[release] if not (folder / name).is_file()]
    if missing:
        raise UserError(f"LiveCodeBench {release} needs {', '.join(missing)} in {folder}: download them from "
                        f"{LCB_DATASET_URL} (the files of code_generation_lite, test.jsonl to "
                        f"{RELEASE_FILES[release][-1]}).", exit_code=EXIT_FAILURE)
    wanted = None if question_ids is None else {str(q) for q in question_ids}
    problems: dict[str, dict[str, Any]] = {}
    for name in RELEASE_FILES[release]:
        with open(folder / name, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    question_id = str(row["question_id"])
                except (ValueError, KeyError, TypeError):
                    raise UserError(f"{folder / name}, line {number}: not a code_generation_lite row",
                                    exit_code=EXIT_FAILURE) from None
                if wanted is None or question_id in wanted:
                    problems[question_id] = row
    return problems


STATEMENT_COLUMNS = ("question_content", "text_input", "question")


def problem_tests(row: Mapping[str, Any], lcb_problem: Mapping[str, Any] | None = None) -> ProblemTests:
    """The tests for one data set row: those of `lcb_problem` (its code_generation_lite row), else the row's
    own LiveCodeBench columns, else the examples of its statement (question_content, text_input or question)."""
    question_id = str(row.get("question_id") or row.get("ground_truth") or "?")
    for source in (lcb_problem, row):
        if source is not None and (source.get("public_test_cases") or source.get("private_test_cases")):
            return lcb_problem_tests({"question_id": question_id, **source})
    statement = next((str(row[c]) for c in STATEMENT_COLUMNS if row.get(c) and "Output" in str(row[c])), "")
    return statement_example_tests(question_id, statement, str(row.get("starter_code") or ""))
