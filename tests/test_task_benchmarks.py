"""The round's other LLM benchmarks as task benchmarks (code/llm_tasks): their data files, prompts and parts, and
llama2-70b-99.9's scoring.

The data tests read the real samples of ../shared/data (skipping, naming the path, when it is absent) and write the
same rows in the official files' formats (pandas pickles, Parquet) to read them back as the MLCommons files are
read. Prompt tests of the closed models need no checkpoint: the official files' token ids are the prompts.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from code.common.arguments import parse_run_args
from code.common.benchmark_api import get_benchmark, samples_for_run
from code.common.constants import AccuracyTarget
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.llm_tasks.datasets import ACCURACY, PERFORMANCE, part_for
from code.llm_tasks.items import read_rows
from code.llm_tasks.responses import read_outputs

LLAMA2, DEEPSEEK, GPT_OSS = (get_benchmark(name) for name in ("llama2-70b-99.9", "deepseek-r1", "gpt-oss-120b"))
RULES = get_round()


SHARED = Path(__file__).resolve().parents[2] / "shared"


def _shared(name: str, relative: str) -> Path:
    path = SHARED / "data" / relative
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared {name} sample lives beside the repository")
    return path


def _rows(name: str, relative: str) -> list[dict]:
    return [json.loads(line) for line in _shared(name, relative).read_text().splitlines() if line.strip()]


def _accuracy_log(path: Path, responses: dict[int, list[int]]) -> Path:
    entries = [{"seq_id": i, "qsl_idx": index, "data": np.asarray(ids, np.int32).tobytes().hex().upper()}
               for i, (index, ids) in enumerate(responses.items())]
    path.write_text(json.dumps(entries))
    return path


# -- data files -------------------------------------------------------------------------------------------------
def test_the_openorca_sample_reads_as_the_reference_pickle_does(tmp_path: Path):
    import pandas as pd

    rows = _rows("openorca", "openorca_sample/open_orca_llama2_40.jsonl")
    paths = Paths.create(scratch=tmp_path)
    LLAMA2.download_data("openorca_sample", paths, print)
    items = LLAMA2.items("openorca_sample", paths)
    assert len(items) == 40 and {i.subset for i in items} == {"cot", "flan", "niv", "t0"}
    assert [i.reference for i in items] == [r["output"] for r in rows]
    assert all(i.tok_input is not None and i.tok_input[-1] == 29871 for i in items)   # processorca.py's trailing id
    # The same rows as the MLCommons pickle, a DataFrame with numpy token arrays, read back the same.
    frame = pd.DataFrame(rows).drop(columns=["calibration_row"])
    frame["tok_input"] = frame["tok_input"].map(np.asarray)
    frame.to_pickle(tmp_path / "official.pkl")
    assert read_rows(tmp_path / "official.pkl")[3]["tok_input"] == rows[3]["tok_input"]


def test_an_official_file_of_the_wrong_size_or_shape_is_refused(tmp_path: Path):
    import pandas as pd

    paths = Paths.create(scratch=tmp_path)
    with pytest.raises(UserError, match=r"(?s)open_orca: not found .*open_orca_gpt4_tokenized_llama.sampled_24576.pkl.*"
                                        r"r2-downloader"):
        LLAMA2.download_data("open_orca", paths, print)
    folder = paths.dataset_dir("open_orca")
    folder.mkdir(parents=True)
    rows = _rows("openorca", "openorca_sample/open_orca_llama2_40.jsonl")
    pd.DataFrame(rows).to_pickle(folder / "open_orca_gpt4_tokenized_llama.sampled_24576.pkl")
    with pytest.raises(UserError, match="holds 40 samples, the MLCommons file has 24576"):
        LLAMA2.download_data("open_orca", paths, print)
    pd.DataFrame([{"question": "q"}]).to_pickle(folder / "open_orca_gpt4_tokenized_llama.sampled_24576.pkl")
    with pytest.raises(UserError, match=r"row 0 lacks the column\(s\) system_prompt, output, tok_input"):
        LLAMA2.download_data("open_orca", paths, print)


def test_the_deepseek_sample_keeps_its_sub_data_sets_and_ground_truths(tmp_path: Path):
    rows = _rows("deepseek", "deepseek_r1_sample/deepseek_r1_sample.jsonl")
    paths = Paths.create(scratch=tmp_path)
    DEEPSEEK.download_data("deepseek_r1_sample", paths, print)
    items = DEEPSEEK.items("deepseek_r1_sample", paths)
    assert [(i.subset, i.reference, i.user) for i in items] == \
        [(r["dataset"], r["ground_truth"], r["text_input"]) for r in rows]
    assert {i.subset for i in items} == {"aime1983", "math500", "mmlu_pro", "livecodebench"}
    # The closed model's chat template, as the official rows' templated_text_input (after the tokenizer's BOS).
    official = _rows("deepseek", "deepseek_r1_sample/mlperf_official_rows.jsonl")
    for row in official:
        item = next(i for i in items if i.user == row["text_input"])
        assert "<｜begin▁of▁sentence｜>" + DEEPSEEK.closed_prompt(item) == row["templated_text_input"]


# -- prompts ------------------------------------------------------------------------------------------------------
def test_the_closed_model_gets_the_official_token_ids_without_a_checkpoint(tmp_path: Path):
    _shared("openorca", "openorca_sample/open_orca_llama2_40.jsonl")
    paths = Paths.create(scratch=tmp_path)
    LLAMA2.download_data("openorca_sample", paths, print)
    prompts = LLAMA2.preprocess("llama2-70b-chat", "openorca_sample", paths, print)
    items = LLAMA2.items("openorca_sample", paths)
    assert len(prompts) == 40
    assert all(prompts.load(i).tolist() == list(items[i].tok_input) for i in (0, 17, 39))
    # A damaged prompts file is named, with the target that makes it again.
    damaged = next(prompts.directory.glob("prompts.*.npz"))
    damaged.write_bytes(damaged.read_bytes()[:-10])
    with pytest.raises(UserError, match="make preprocess_data"):
        LLAMA2.preprocessed("llama2-70b-chat", "openorca_sample", paths)


def test_gpt_oss_needs_the_harmony_token_ids_for_its_closed_model(tmp_path: Path):
    _shared("gpt-oss-120b", "gpt_oss_120b_sample/gpt_oss_120b_acc_sample.jsonl")
    paths = Paths.create(scratch=tmp_path)
    GPT_OSS.download_data("gpt_oss_sample", paths, print)
    with pytest.raises(UserError, match="Harmony conversations.*input_tokens"):
        GPT_OSS.preprocess("gpt-oss-120b", "gpt_oss_sample", paths, print)
    items = GPT_OSS.items("gpt_oss_sample", paths)
    aime = next(i for i in items if i.subset == "aime25")
    assert aime.system.startswith("Reasoning: high") and "\\boxed{answer}" in aime.system
    code = next(i for i in items if i.subset == "livecodebench_v6")
    assert "```python" in code.system and code.reference == "3154"


def test_each_kind_of_run_reads_its_part_of_the_gpt_oss_files(tmp_path: Path):
    import pandas as pd

    paths = Paths.create(scratch=tmp_path)
    folder = paths.dataset_dir("gpt_oss_eval")
    sizes = {"perf/perf_eval_ref.parquet": 3, "acc/acc_eval_inputs.parquet": 2,
             "acc/acc_eval_compliance_gpqa.parquet": 1}
    for offset, (name, count) in enumerate(sizes.items()):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"dataset": ["gpqa_diamond"] * count, "ground_truth": ["A"] * count,
                      "input_tokens": [np.arange(4 + offset * 10 + i) for i in range(count)]}).to_parquet(folder / name)
    with pytest.raises(UserError, match="holds 3 samples, the MLCommons file has 6396"):
        GPT_OSS.download_data("gpt_oss_eval", paths, print)
    prompts = GPT_OSS.preprocess("gpt-oss-120b", "gpt_oss_eval", paths, print)
    assert len(prompts) == 3                                              # as a set: the performance part
    assert len(samples_for_run(prompts, accuracy=True, audit_test=None)) == 2
    assert len(samples_for_run(prompts, accuracy=False, audit_test="TEST09")) == 3
    # TEST07's data set is another file of the same download, in the same folder.
    gpqa = GPT_OSS.preprocess("gpt-oss-120b", "gpt_oss_compliance_gpqa", paths, print)
    assert len(gpqa) == 1 and gpqa.load(0).tolist() == list(range(24))
    assert not paths.dataset_dir("gpt_oss_compliance_gpqa").exists()
    assert samples_for_run(prompts, accuracy=True, audit_test=None).load(1).tolist() == list(range(15))
    data = GPT_OSS.task_dataset("gpt_oss_eval")
    assert (part_for(data, True, None), part_for(data, False, None)) == (ACCURACY, PERFORMANCE)


def test_a_data_set_file_edited_after_preprocess_data_is_refused_for_runs_and_scoring(tmp_path: Path):
    """A ground truth edited in the accuracy file after its prompts were made: the run (which opens the prompts) and
    the scoring (which reads the references) stop, naming the file and the make preprocess_data command; the
    other parts' runs go on, and preprocessing again makes the set current."""
    import pandas as pd

    paths = Paths.create(scratch=tmp_path)
    folder = paths.dataset_dir("gpt_oss_eval")
    for name, count in (("perf/perf_eval_ref.parquet", 3), ("acc/acc_eval_inputs.parquet", 2)):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"dataset": ["aime25"] * count, "ground_truth": ["7"] * count,
                      "input_tokens": [np.arange(4 + i) for i in range(count)]}).to_parquet(folder / name)
    GPT_OSS.preprocess("gpt-oss-120b", "gpt_oss_eval", paths, print)
    accuracy_file = folder / "acc/acc_eval_inputs.parquet"
    manifest = json.loads((paths.preprocessed_dir("gpt-oss-120b", "gpt-oss-120b", "gpt_oss_eval")
                           / "manifest.json").read_text())
    edited = pd.read_parquet(accuracy_file)
    edited.loc[1, "ground_truth"] = "8"
    edited.to_parquet(accuracy_file)
    hint = 'make preprocess_data RUN_ARGS="--benchmarks=gpt-oss-120b --model=gpt-oss-120b --dataset=gpt_oss_eval"'
    with pytest.raises(UserError) as refused:
        GPT_OSS.preprocessed("gpt-oss-120b", "gpt_oss_eval", paths)
    assert refused.value.exit_code == 1 and str(accuracy_file) in str(refused.value) and hint in str(refused.value)
    log = _accuracy_log(tmp_path / "mlperf_log_accuracy.json", {0: [1, 2], 1: [3]})
    with pytest.raises(UserError, match=re.escape(str(accuracy_file))):
        GPT_OSS.outputs("gpt-oss-120b", "gpt_oss_eval", log, paths)
    after = json.loads((paths.preprocessed_dir("gpt-oss-120b", "gpt-oss-120b", "gpt_oss_eval")
                        / "manifest.json").read_text())
    assert after == manifest                                  # nothing rewritten by the refusals
    GPT_OSS.preprocess("gpt-oss-120b", "gpt_oss_eval", paths, print)
    assert len(GPT_OSS.preprocessed("gpt-oss-120b", "gpt_oss_eval", paths)) == 3


def test_a_llama2_sample_edited_after_preprocess_data_is_refused(tmp_path: Path):
    _shared("openorca", "openorca_sample/open_orca_llama2_40.jsonl")
    paths = Paths.create(scratch=tmp_path)
    LLAMA2.download_data("openorca_sample", paths, print)
    LLAMA2.preprocess("llama2-70b-chat", "openorca_sample", paths, print)
    linked = next(p for p in paths.dataset_dir("openorca_sample").iterdir() if p.is_symlink())
    rows = linked.read_text().splitlines()
    row = json.loads(rows[3])
    row["output"] = "an edited reference"
    linked.unlink()                                           # the user's own copy, edited (the shared file stays)
    linked.write_text("\n".join([*rows[:3], json.dumps(row), *rows[4:]]) + "\n")
    with pytest.raises(UserError) as refused:
        LLAMA2.preprocessed("llama2-70b-chat", "openorca_sample", paths)
    assert str(linked) in str(refused.value) and "--benchmarks=llama2-70b-99.9" in str(refused.value)


# -- scoring ----------------------------------------------------------------------------------------------------
class _WordTokenizer:
    """Token id i is word i of a fixed list: enough to write and read accuracy logs."""

    def __init__(self, text: str) -> None:
        self.words = text.split()

    def decode(self, ids, skip_special_tokens=True) -> str:
        return " ".join(self.words[i] for i in ids)


def test_llama2_is_scored_as_evaluate_accuracy_py_prints_it(tmp_path: Path):
    rows = _rows("openorca", "openorca_sample/open_orca_llama2_40.jsonl")
    paths = Paths.create(scratch=tmp_path)
    LLAMA2.download_data("openorca_sample", paths, print)
    items = LLAMA2.items("openorca_sample", paths)
    vocabulary = _WordTokenizer(items[0].reference + " " + items[1].reference)
    first = len(items[0].reference.split())
    log = _accuracy_log(tmp_path / "mlperf_log_accuracy.json",
                        {0: list(range(first)), 1: list(range(first, len(vocabulary.words)))})
    outputs = read_outputs(log, len(items), vocabulary.decode)
    result = LLAMA2.score_outputs([items[i] for i in outputs.qsl_indices], outputs)
    assert result.get("ROUGE1") == 100.0 and result.samples == 2
    assert result.get("TOKENS_PER_SAMPLE") == round(len(vocabulary.words) / 2, 1)
    line = result.text.splitlines()[2]
    rules = RULES.benchmark("llama2-70b-99.9")
    for bound in rules.accuracy_bounds(AccuracyTarget.k_99_9):
        assert float(re.match(bound.pattern, line).group(1)) == result.get(bound.name), bound.name
    assert rows[0]["output"] == items[0].reference


def test_a_benchmark_with_one_accuracy_target_uses_it_unless_told():
    targets = {name: bench.accuracy_targets for name, bench in RULES.benchmarks.items()}

    def args(*argv: str):
        parsed = parse_run_args(["--action=run_harness", *argv], ["run_harness"], list(RULES.benchmarks),
                                list(RULES.benchmarks))
        return parsed.with_only_accuracy_target(targets)

    assert args("--benchmarks=llama2-70b-99.9").workload.accuracy_target is AccuracyTarget.k_99_9
    assert args("--benchmarks=gpt-oss-120b").workload.accuracy_target is AccuracyTarget.k_99
    mixed = args("--benchmarks=llama2-70b-99.9,resnet50")
    assert mixed.workload.accuracy_target is AccuracyTarget.k_99
    assert mixed.workload_for("llama2-70b-99.9").accuracy_target is AccuracyTarget.k_99_9
    assert mixed.workload_for("resnet50").accuracy_target is AccuracyTarget.k_99
    told = args("--benchmarks=llama2-70b-99.9", "--accuracy_target=99")
    assert told.workload_for("llama2-70b-99.9").accuracy_target is AccuracyTarget.k_99     # then refused, named


def test_the_closed_models_run_on_serving_engines_only():
    from code.common.harness.registry import HARNESSES
    from code.common.harness.selection import refuse_served_only

    for benchmark in (LLAMA2, DEEPSEEK, GPT_OSS):
        closed = benchmark.models[benchmark.closed.name]
        assert closed.served_only and closed.division == "closed" and closed.served_name == benchmark.closed.hf_id
        with pytest.raises(UserError, match="--harness_type=openai"):
            refuse_served_only(HARNESSES.get("llm"), closed)
        refuse_served_only(HARNESSES.get("openai"), closed)
        refuse_served_only(HARNESSES.get("llm"), benchmark.models["smollm2-135m-instruct"])


def _reference_script(relative: str) -> Path:
    """A file of the reference implementations, in the official tools MLPERF_INFERENCE_DIR points at (conftest
    points it at ../shared/mlcommons-inference, which holds the LLM benchmarks' scorers)."""
    from tests.official_tools import NOT_AT_HAND, inference_dir

    root = inference_dir()
    if root is None:
        pytest.skip(f"{NOT_AT_HAND}: {relative} was not run")
    if not (root / relative).is_file():
        pytest.skip(f"{root / relative} is absent: point MLPERF_INFERENCE_DIR at a checkout of mlcommons/inference")
    return root / relative


def test_llama2_scores_as_the_reference_evaluate_accuracy_py(tmp_path: Path, monkeypatch, capsys):
    """The official evaluate-accuracy.py, its own code, on the same accuracy log: its imports that need the network
    or a 70B checkpoint stand in as they behave (evaluate's rouge is rouge-score's scorer per pair; the tokenizer
    decodes the same ids), its sentence splitter is nltk's with the same Punkt model."""
    import ast
    import types

    import pandas as pd
    from rouge_score import rouge_scorer

    from tests.official_tools import nltk_with_punkt_tab

    script = _reference_script("language/llama2-70b/evaluate-accuracy.py")
    paths = Paths.create(scratch=tmp_path)
    LLAMA2.download_data("openorca_sample", paths, print)
    items = LLAMA2.items("openorca_sample", paths)
    vocabulary = _WordTokenizer(" ".join(item.reference for item in items[:6]))
    rng = np.random.default_rng(7)
    responses = {index: rng.integers(0, len(vocabulary.words), int(rng.integers(5, 80))).tolist()
                 for index in (4, 0, 2, 5, 1)}
    responses[3] = list(range(len(items[0].reference.split())))          # one answer word for word
    log = _accuracy_log(tmp_path / "mlperf_log_accuracy.json", responses)
    outputs = read_outputs(log, len(items), vocabulary.decode)
    ours = LLAMA2.score_outputs([items[i] for i in outputs.qsl_indices], outputs)
    pd.DataFrame({"output": [item.reference for item in items]}).to_pickle(tmp_path / "data.pkl")

    class Rouge:
        def compute(self, predictions, references, use_stemmer, use_aggregator):
            scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=use_stemmer)
            pairs = [scorer.score(ref, pred) for ref, pred in zip(references, predictions)]
            return {key: [pair[key].fmeasure for pair in pairs] for key in pairs[0]}

    class Tokenizer:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            return Tokenizer()

        def batch_decode(self, ids, skip_special_tokens):
            return [vocabulary.decode(i) for i in ids]

    class Pool:
        def __init__(self, processes):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def map(self, function, chunks):
            return [function(chunk) for chunk in chunks]

    import argparse
    import json as json_module

    with nltk_with_punkt_tab(tmp_path / "nltk_data") as nltk:
        monkeypatch.setattr(nltk, "download", lambda *a, **k: True)
        tree = ast.parse(script.read_text(encoding="utf-8"))
        body = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        namespace = {"argparse": argparse, "nltk": nltk, "np": np, "json": json_module, "AutoTokenizer": Tokenizer,
                     "evaluate": types.SimpleNamespace(load=lambda name: Rouge()), "Pool": Pool,
                     "cpu_count": lambda: 2}
        exec(compile(ast.Module(body=body, type_ignores=[]), str(script), "exec"), namespace)   # noqa: S102
        monkeypatch.setattr("sys.argv", ["evaluate-accuracy.py", "--checkpoint-path", "x", "--mlperf-accuracy-file",
                                         str(log), "--dataset-file", str(tmp_path / "data.pkl"), "--dtype", "int32"])
        namespace["main"]()
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    official = {key: float(value) for key, value in
                re.findall(r"'(\w+)': (?:np\.\w+\()?([\d.]+)\)?", printed)}
    assert official["rouge1"] == ours.get("ROUGE1") and official["rouge2"] == ours.get("ROUGE2")
    assert official["rougeL"] == ours.get("ROUGEL") and official["rougeLsum"] == ours.get("ROUGELSUM")
    assert official["tokens_per_sample"] == ours.get("TOKENS_PER_SAMPLE")
    assert (official["gen_len"], official["gen_num"]) == (ours.get("GEN_LEN"), ours.get("GEN_NUM"))


def test_a_smaller_data_set_is_logged_as_the_accuracy_sample_count():
    """mlperf.conf's gpt-oss-120b.*.accuracy_sample_count_override = 4395 is logged as the accuracy run's count
    whatever the data set holds (a 16-sample run logged 4395); user.conf sets the count the data set has."""
    from code.common.constants import Scenario
    from code.common.harness.settings import user_conf_lines

    rules = RULES.benchmark("gpt-oss-120b")
    fields = {"offline_expected_qps": 1.0, "total_sample_count": 16}
    assert "gpt-oss-120b.Offline.accuracy_sample_count_override = 16" in \
        user_conf_lines("gpt-oss-120b", Scenario.Offline, fields, rules, 31, test_run=False)
    lines = user_conf_lines("gpt-oss-120b", Scenario.Offline, {"offline_expected_qps": 1.0}, rules, 4395,
                            test_run=False)
    assert not any("accuracy_sample_count_override" in line for line in lines)
