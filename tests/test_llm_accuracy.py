"""Benchmark llama3.1-8b: the CNN/DailyMail data sets and the ROUGE scorer of evaluation.py.

The data tests read the 250 real CNN/DailyMail test articles of ../shared/data/cnndm_sample (skipping, naming the
path, when it is absent). The scorer tests write LoadGen accuracy logs of int32 token ids and score them on the
run path (Benchmark.score) with a word-list "tokenizer", so that no model is needed. The patterns and targets of the round's checker are recorded
below as facts; with MLPERF_INFERENCE_DIR pointing at a checkout of the inference repository, they are also
compared with its tools/submission/submission_checker/constants.py.
"""
from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

from code.common.benchmark_api import get_benchmark
from code.common.constants import AccuracyTarget
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.llama3_1_8b.accuracy import accuracy_result, result_line
from code.llama3_1_8b.datasets import PROMPT_TEMPLATE, detokenize_ptb, prompt_text
from code.llm.rouge import postprocess, score_outputs, split_sentences
from code.llm_tasks.datasets import download_hint
from code.llm_tasks.items import TaskItem
from tests.official_tools import NOT_AT_HAND, evaluation_function, inference_dir, nltk_with_punkt_tab

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLE = SHARED / "data" / "cnndm_sample" / "cnndm_test_250.json"
BENCHMARK = get_benchmark("llama3.1-8b")
SUBSTITUTE, LLAMA = "smollm2-135m-instruct", "llama3.1-8b-instruct"

# tools/submission/submission_checker/constants.py (inference repository, v6.1), ACC_PATTERN: the regexes the
# checker applies to each line of accuracy.txt for llama3.1-8b and llama3.1-8b-edge; accuracy_check.py also
# requires a `hash=` line (truncate_accuracy_log.py appends it).
ACC_PATTERN = {
    "ROUGE1": r".*'rouge1':\s+'?([\d.]+)'?.*",
    "ROUGE2": r".*'rouge2':\s+'?([\d.]+)'?.*",
    "ROUGEL": r".*'rougeL':\s+'?([\d.]+)'?.*",
    "ROUGELSUM": r".*'rougeLsum':\s+'?([\d.]+)'?.*",
    "GEN_LEN": r".*'gen_len':\s([\d.]+).*",
}
HASH_PATTERN = r"^hash=([\w\d]+)$"
# The same file, MODEL_CONFIG["v6.1"]: "accuracy-target" and "accuracy-upper-limit".
CHECKER_TARGETS = {
    "llama3.1-8b": ("ROUGE1", 38.7792 * 0.99, "ROUGE2", 15.9075 * 0.99, "ROUGEL", 24.4957 * 0.99,
                    "ROUGELSUM", 35.793 * 0.99, "GEN_LEN", 8167644 * 0.9),
    "llama3.1-8b-edge": ("ROUGE1", 39.06 * 0.99, "ROUGE2", 16.1147 * 0.99, "ROUGEL", 24.6375 * 0.99,
                         "ROUGELSUM", 36.124 * 0.99, "GEN_LEN", 3051113 * 0.9),
}
CHECKER_UPPER_LIMITS = {"llama3.1-8b": ("GEN_LEN", 8167644 * 1.1), "llama3.1-8b-edge": ("GEN_LEN", 3051113 * 1.1)}
# The accuracy.txt of the round's sample submission (tools/submission/directory_structure_samples/sample_1/open/
# NVIDIA/results/Jetson-Thor_TRT/llama3.1-8b-edge/SingleStream/accuracy/accuracy.txt), evaluation.py's output.
OFFICIAL_SAMPLE_LINE = ("{'rouge1': '38.8638', 'rouge2': '16.2134', 'rougeL': '24.5295', 'rougeLsum': '35.8712', "
                        "'gen_len': 3077653, 'gen_num': 5000}")


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared evaluation data lives beside the repository")


def _paths(root: Path, repo: Path = REPO) -> Paths:
    return Paths(repo=repo, scratch=root / "scratch", log_dir=root / "logs")


def _sample() -> list[dict]:
    _need(SAMPLE)
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def dataset_file(dataset: str, paths: Paths) -> Path:
    data = BENCHMARK.task_dataset(dataset)
    return data.directory(paths) / data.files["all"]


def download_data(dataset: str, paths: Paths, log) -> Path:
    """make download_data of one data set: the file it put in place (or checked)."""
    BENCHMARK.download_data(dataset, paths, log)
    return dataset_file(dataset, paths)


# -- data -----------------------------------------------------------------------------------------

def test_ptb_highlights_read_as_plain_text() -> None:
    rows = _sample()
    assert detokenize_ptb(rows[3]["highlights"]).startswith(
        "Kite's total length is 6 km (3.7 miles) and is made of 2,000 sections. But only half")
    assert "A troll called 'fatalsplash' then accused Alexis of being a 'gold digger' Fowler told the hater" \
        in detokenize_ptb(rows[5]["highlights"])
    assert detokenize_ptb("It was reported nation did n't have funds . Greece owes £ 330million to the IMF .") == \
        "It was reported nation didn't have funds. Greece owes £330million to the IMF."
    assert detokenize_ptb("within `` 20 to 30 years , '' she said in Washington , D.C. . Mila Kunis ' friend") == \
        "within \"20 to 30 years,\" she said in Washington, D.C. Mila Kunis' friend"
    for row in rows:
        text = detokenize_ptb(row["highlights"])
        assert not re.search(r"-[LR][RSC]B-| 's\b| n't\b| [.,;:?!%)]|``|''|\( |\$ \d", text), text
        assert text.split() and text == text.strip()


def test_sentences_of_real_highlights_split_as_punkt_does() -> None:
    highlights = [detokenize_ptb(row["highlights"]) for row in _sample()]
    assert split_sentences(highlights[0]) == [
        "Gary Locke will be confirmed as Kilmarnock boss on Friday.",
        "The club went unbeaten during Locke's first six games in charge.",
        "The 39-year-old former Killie defender has paid tribute to his players."]
    # Known English abbreviations do not end a sentence; a known one before a frequent sentence starter does.
    assert split_sentences(highlights[77]) == [
        "How does ISIS govern?", "Robert Downey Jr. isn't the only celebrity to walk out of an interview."]
    assert len(split_sentences(highlights[37])) == 4 and "the U.S. Census Bureau" in split_sentences(highlights[37])[0]
    assert split_sentences("He met Mr. Smith in the U.S. on Friday. The talks failed.") == [
        "He met Mr. Smith in the U.S. on Friday.", "The talks failed."]
    # Recorded: nltk's Punkt with NLTK's English model (nltk 3.8.1, the reference's pin, and 3.10.4 alike) splits
    # these 250 highlights into 920 sentences. Its orthographic table decides 86 and 211: "J." and "Co." end a
    # sentence there, as "Brown" and "Reportedly" are not seen capitalised inside sentences.
    assert sum(len(split_sentences(text)) for text in highlights) == 920
    assert split_sentences(highlights[86])[:2] == [
        "The black pooch was filmed in action as he took a rescue rope out to his owner at the Clarence J.",
        "Brown Dam and Reservoir in Ohio on Saturday."]
    assert split_sentences(highlights[211])[:2] == [
        "Mary Pat Christie, 51, quit her position at finance firm Angleo Gordon & Co.",
        "Reportedly told colleagues the move would precede a Christie campaign."]
    # Recorded: nltk 3.8.1's Punkt splits the 250 articles into 5708 sentences (nltk 3.10.4's into 5791: it also
    # ends a sentence at a closing curly quote, as in "...enough.’ Locke returned", which 3.8.1 keeps whole).
    assert sum(len(split_sentences(row["article"])) for row in _sample()) == 5708
    assert split_sentences("He said: ‘I can’t thank them enough.’ Locke returned.") == [
        "He said: ‘I can’t thank them enough.’ Locke returned."]
    assert postprocess("  One sentence. Another one.\n") == "One sentence.\nAnother one."


@pytest.fixture
def nltk_punkt_tab(tmp_path: Path):
    """nltk, with NLTK's English Punkt model where nltk.sent_tokenize looks for it (what evaluation.py's
    nltk.download('punkt_tab') fetches), so that nltk's own function runs here without the network."""
    with nltk_with_punkt_tab(tmp_path / "nltk_data") as nltk:
        yield nltk


def _texts() -> tuple[list[str], list[str]]:
    """Texts to split: the 250 references, and outputs of the kinds a model writes (the articles, and their first
    three sentences: quotes, initials, abbreviations, curly quotes)."""
    rows = _sample()
    references = [detokenize_ptb(row["highlights"]) for row in rows]
    lead = [" ".join(split_sentences(row["article"])[:3]) for row in rows]
    return references, [row["article"] for row in rows] + lead


def test_sentences_split_as_nltk_sent_tokenize(nltk_punkt_tab) -> None:
    references, outputs = _texts()
    for text in references + outputs:
        assert split_sentences(text) == nltk_punkt_tab.sent_tokenize(text), text


def test_texts_are_postprocessed_as_evaluation_py_does(nltk_punkt_tab) -> None:
    """evaluation.py's own postprocess_text (run from the official file, with nltk and the English model) gives
    the texts the scorer scores, and so its GEN_LEN; and the reference pins the versions the toolkit follows."""
    checkout = inference_dir()
    if checkout is None:
        pytest.skip(f"{NOT_AT_HAND}: evaluation.py's postprocess_text was not run")
    postprocess_text = evaluation_function(checkout, "postprocess_text", nltk=nltk_punkt_tab)
    references, outputs = _texts()
    predictions = outputs[:len(references)]
    preds, targets = postprocess_text(predictions, references)
    assert preds == [postprocess(text) for text in predictions]
    assert targets == [postprocess(text) for text in references]
    assert score_outputs(predictions, references)["gen_len"] == sum(len(text) for text in preds)
    pins = (checkout / "language" / "llama3.1-8b" / "requirements.txt").read_text().split()
    assert "nltk==3.8.1" in pins and "transformers==4.46.2" in pins


def test_load_articles_reads_the_shared_sample_in_file_order(tmp_path: Path) -> None:
    rows = _sample()
    paths = _paths(tmp_path)
    lines: list[str] = []
    target = download_data("cnndm_sample", paths, lines.append)
    assert target.is_symlink() and target.resolve() == SAMPLE.resolve()
    articles = BENCHMARK.items("cnndm_sample", paths)
    assert len(articles) == 250 == BENCHMARK.datasets["cnndm_sample"].sample_count
    assert [a.row["id"] for a in articles] == [r["id"] for r in rows]
    assert articles[0].user == rows[0]["article"] and articles[0].tok_input is None
    assert articles[0].reference.startswith("Gary Locke will be confirmed as Kilmarnock boss on Friday. The club")
    assert not any(" 's " in a.reference or "-LRB-" in a.reference for a in articles)
    lines.clear()
    download_data("cnndm_sample", paths, lines.append)            # again: nothing to do
    assert any("already links" in line for line in lines)
    assert BENCHMARK.calibration_indices("cnndm_sample", 8, paths) == list(range(8))
    assert BENCHMARK.calibration_indices("cnndm_sample", 20000, paths) == list(range(250))
    with pytest.raises(UserError):
        BENCHMARK.calibration_indices("cnndm_sample", 0, paths)


def test_prompt_is_the_reference_template() -> None:
    assert PROMPT_TEMPLATE == ("Summarize the following news article in 128 tokens. Please output the summary only, "
                               "without any other text.\n\nArticle:\n{input}\n\nSummary:")
    text = prompt_text(TaskItem(user="A {braced} article.", reference="ref", subset="cnn_dailymail"))
    assert text.endswith("Article:\nA {braced} article.\n\nSummary:") and text == prompt_text("A {braced} article.")
    assert BENCHMARK.prompt_template == PROMPT_TEMPLATE
    assert BENCHMARK.closed_prompt(TaskItem(user="A {braced} article.", reference="", subset="")) == text


def test_missing_mlcommons_files_say_where_to_get_them(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    for dataset, file_name, uri, mlcr in (
            ("cnn_eval", "cnn_eval.json", "llama3-1-8b-cnn-eval.uri", "_validation,_datacenter,_llama3"),
            ("cnn_eval_5000", "sample_cnn_eval_5000.json", "llama3-1-8b-sample-cnn-eval-5000.uri",
             "_validation,_edge,_llama3")):
        with pytest.raises(UserError) as error:
            download_data(dataset, paths, print)
        message = str(error.value)
        assert str(paths.dataset_dir(dataset) / file_name) in message
        assert f"https://inference.mlcommons-storage.org/metadata/{uri}" in message
        assert f"mlcr get,dataset,cnndm,{mlcr}" in message and "r2-downloader" in message
        with pytest.raises(UserError, match=re.escape(download_hint("llama3.1-8b", dataset))):
            BENCHMARK.items(dataset, paths)
    assert download_hint("llama3.1-8b", "cnn_eval") == 'make download_data RUN_ARGS="--benchmarks=llama3.1-8b --dataset=cnn_eval"'


def test_mlcommons_layout_is_read_and_checked(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    rows = [{"instruction": {"llama": PROMPT_TEMPLATE}, "input": f"Article {i}.", "tok_input": [128000, i],
             "output": f"Highlight {i} .\nSecond line ."} for i in range(3)]
    target = dataset_file("cnn_eval", paths)
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(rows))
    articles = BENCHMARK.items("cnn_eval", paths)
    assert (articles[2].user, articles[2].reference) == ("Article 2.", "Highlight 2 .\nSecond line .")   # as it is
    assert articles[2].tok_input == (128000, 2)
    with pytest.raises(UserError, match="holds 3 samples, the MLCommons file has 13368"):
        download_data("cnn_eval", paths, print)
    target.write_text(json.dumps([{"input": "Article.", "tok_input": [1]}]))
    with pytest.raises(UserError, match="row 0 lacks the column.s. output"):
        BENCHMARK.items("cnn_eval", paths)


def test_sample_without_shared_data_says_so(tmp_path: Path) -> None:
    paths = _paths(tmp_path, repo=tmp_path / "repo")
    with pytest.raises(UserError, match="cnndm_test_250.json is absent"):
        download_data("cnndm_sample", paths, print)


# -- scoring --------------------------------------------------------------------------------------

def test_a_reference_scores_100_against_itself() -> None:
    references = [detokenize_ptb(row["highlights"]) for row in _sample()]
    scores = score_outputs(references, references)
    assert {k: scores[k] for k in ("rouge1", "rouge2", "rougeL", "rougeLsum")} == \
        {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0, "rougeLsum": 100.0}
    assert scores["gen_num"] == 250 and scores["gen_len"] == sum(len(postprocess(r)) for r in references)


def test_lead_3_scores_as_published() -> None:
    """The first three sentences of each article, a classic baseline: See et al. (2017) report ROUGE-1 40.34,
    ROUGE-2 17.70, ROUGE-L 36.57 (summary-level) on the whole CNN/DailyMail test set."""
    rows = _sample()
    lead = [" ".join(split_sentences(row["article"])[:3]) for row in rows]
    scores = score_outputs(lead, [detokenize_ptb(row["highlights"]) for row in rows])
    assert abs(scores["rouge1"] - 40.34) < 2 and abs(scores["rouge2"] - 17.70) < 2
    assert abs(scores["rougeLsum"] - 36.57) < 2 and scores["rougeL"] < scores["rougeLsum"]
    # Recorded with rouge-score 0.1.2 and nltk 3.8.1 (the reference's pins; 3.9.4 gives the same): a change here
    # changes every figure the toolkit reports.
    assert scores == {"rouge1": 41.275, "rouge2": 18.8451, "rougeL": 26.3846, "rougeLsum": 37.3901,
                      "gen_len": 117646, "gen_num": 250}


def _word_codec(texts: list[str]) -> tuple[list[str], dict[str, int]]:
    vocabulary = sorted({word for text in texts for word in text.split()})
    return vocabulary, {word: i for i, word in enumerate(vocabulary)}


def test_an_accuracy_log_scores_as_its_decoded_texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run path (Benchmark.score) on a data set of 24 sample articles, decoded by a word-list tokenizer."""
    rows = _sample()[:24]
    paths = _paths(tmp_path)
    dataset_file("cnndm_sample", paths).parent.mkdir(parents=True)
    dataset_file("cnndm_sample", paths).write_text(json.dumps(rows))
    references = [detokenize_ptb(row["highlights"]) for row in rows]
    predictions = [" ".join(split_sentences(row["article"])[:2]) for row in rows]
    vocabulary, ids = _word_codec(predictions + ["wrong"])
    order = [5, 0, 17, 3, 23, 11, 2, 8]

    def hex_of(text: str) -> str:
        return np.asarray([ids[w] for w in text.split()], dtype=np.int32).tobytes().hex().upper()

    entries = [{"seq_id": n, "qsl_idx": i, "data": hex_of(predictions[i])} for n, i in enumerate(order)]
    entries.insert(3, {"seq_id": 99, "qsl_idx": 17, "data": hex_of("wrong")})   # a repeat: the first counts
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps(entries))
    decoded: list[np.ndarray] = []

    class Words:
        def decode(self, tokens: np.ndarray, skip_special_tokens: bool = False) -> str:
            assert skip_special_tokens          # evaluation.py decodes with skip_special_tokens=True
            decoded.append(tokens)
            return " ".join(vocabulary[int(t)] for t in tokens)

    monkeypatch.setattr(BENCHMARK, "tokenizer", lambda model, paths: Words())
    result = BENCHMARK.score(SUBSTITUTE, "cnndm_sample", log, paths)
    assert len(decoded) == len(order) and all(t.dtype == np.int32 for t in decoded)
    expected = score_outputs([" ".join(predictions[i].split()) for i in order], [references[i] for i in order])
    assert [m.name for m in result.metrics] == ["ROUGE1", "ROUGE2", "ROUGEL", "ROUGELSUM", "GEN_LEN", "GEN_NUM"]
    assert result.metric == "ROUGE1" and result.value == expected["rouge1"] and result.samples == len(order)
    assert [m.unit for m in result.metrics][4:] == ["", ""] and result.get("GEN_LEN") == expected["gen_len"]
    assert result.text.splitlines() == ["Results", "", result_line(expected),
                                        f"found {len(order) + 1} results, {len(order)} samples, ignored 1 dupes"]

    entries.append({"seq_id": 100, "qsl_idx": 24, "data": hex_of("wrong")})
    log.write_text(json.dumps(entries))
    with pytest.raises(UserError, match="qsl_idx 24 is outside the data set's 24 samples"):
        BENCHMARK.score(SUBSTITUTE, "cnndm_sample", log, paths)
    log.write_text(json.dumps([{"seq_id": 0, "qsl_idx": 0, "data": "00000000AB"}]))
    with pytest.raises(UserError, match="not a whole number of int32 token ids"):
        BENCHMARK.score(SUBSTITUTE, "cnndm_sample", log, paths)
    with pytest.raises(UserError, match="Cannot score: .* is missing"):
        BENCHMARK.score(SUBSTITUTE, "cnndm_sample", tmp_path / "absent.json", paths)


def test_a_closed_division_accuracy_log_is_decoded_as_evaluation_decodes_it(tmp_path: Path) -> None:
    """Llama 3.1 Instruct's tokenizer_config.json sets clean_up_tokenization_spaces, and evaluation.py decodes with
    that tokenizer (transformers' batch_decode, special tokens skipped): " ." becomes ".", " 's" "'s". The
    benchmark's scorer, on a checkpoint folder in that shape, reports the GEN_LEN of the cleaned-up texts."""
    from tests.test_llm_decoder import (CLEANED, SPACED, TINY, RopeScaling, random_weights, tiny_tokenizer_json,
                                        write_checkpoint)

    _need(SHARED / "data" / "cnndm_sample" / "cnndm_test_250.json")
    paths = _paths(tmp_path)
    download_data("cnndm_sample", paths, print)
    folder = paths.model_dir(BENCHMARK.name) / "Llama-3.1-8B-Instruct"
    scaling = RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=64)
    write_checkpoint(folder, random_weights(TINY.__class__(**{**TINY.__dict__, "rope_scaling": scaling})))
    ids = tiny_tokenizer_json(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": True}))
    tokenizer = BENCHMARK.tokenizer(LLAMA, paths)
    tokens = np.asarray(tokenizer.encode(SPACED, add_bos=False) + [ids["<|eot_id|>"]], dtype=np.int32)
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"seq_id": i, "qsl_idx": i, "data": tokens.tobytes().hex().upper()}
                               for i in range(3)]))
    result = BENCHMARK.score(LLAMA, "cnndm_sample", log, paths)
    # evaluation.py's gen_len: the characters of the decoded, stripped texts put one sentence a line (the spaces
    # between CLEANED's four sentences become newlines; SPACED decoded as it is would count 3 x 106).
    assert len(SPACED) == 106 and len(CLEANED) == 90
    assert result.get("GEN_LEN") == 3 * 90 and result.get("GEN_NUM") == 3


def _checker_verdict(text: str, model: str) -> tuple[bool, dict[str, str]]:
    """accuracy_check.py's accuracy_result_check on accuracy.txt lines, with the recorded patterns and targets."""
    targets, (limit_name, limit) = CHECKER_TARGETS[model], CHECKER_UPPER_LIMITS[model]
    found: dict[str, str] = {}
    valid, hash_seen = True, False
    for line in text.splitlines():
        hash_seen |= bool(re.match(HASH_PATTERN, line))
        for name, target in zip(targets[0::2], targets[1::2]):
            match = re.match(ACC_PATTERN[name], line)
            if match:
                found[name] = match.group(1)
                valid &= float(match.group(1)) >= target
        match = re.match(ACC_PATTERN[limit_name], line)
        if match:
            valid &= float(match.group(1)) <= limit
    return valid and hash_seen and len(found) == len(targets) // 2, found


def test_accuracy_txt_is_read_by_the_checkers_patterns() -> None:
    assert result_line({"rouge1": 38.8638, "rouge2": 16.2134, "rougeL": 24.5295, "rougeLsum": 35.8712,
                        "gen_len": 3077653, "gen_num": 5000}) == OFFICIAL_SAMPLE_LINE
    reference = {"rouge1": 38.7792, "rouge2": 15.9075, "rougeL": 24.4957, "rougeLsum": 35.793,
                 "gen_len": 8167644, "gen_num": 13368}
    text = accuracy_result(reference, 13370, 2).text + "\nhash=" + "ab" * 32
    valid, found = _checker_verdict(text, "llama3.1-8b")
    assert valid and found == {"ROUGE1": "38.7792", "ROUGE2": "15.9075", "ROUGEL": "24.4957",
                               "ROUGELSUM": "35.793", "GEN_LEN": "8167644"}
    too_long = accuracy_result({**reference, "gen_len": 8167644 * 1.2}, 13368).text + "\nhash=00"
    assert not _checker_verdict(too_long, "llama3.1-8b")[0]
    low = accuracy_result({**reference, "rouge2": 15.0}, 13368).text + "\nhash=00"
    assert not _checker_verdict(low, "llama3.1-8b")[0]
    # What evaluation.py prints under numpy 2 is not read: gen_len must be a bare integer.
    assert not re.match(ACC_PATTERN["GEN_LEN"], "{'rouge1': '38.7', 'gen_len': np.int64(8167644), 'gen_num': 1}")


def test_targets_are_the_rounds() -> None:
    """The rules table, the one place that keeps the targets, holds the checker's figures."""
    for model, recorded in CHECKER_TARGETS.items():
        bounds = {b.name: b for b in get_round("v6.1").benchmark(model).accuracy_bounds(AccuracyTarget.k_99)}
        assert list(bounds) == list(recorded[0::2])
        for name, value in zip(recorded[0::2], recorded[1::2]):
            assert bounds[name].minimum == pytest.approx(value, rel=1e-12)
        assert bounds["GEN_LEN"].maximum == pytest.approx(CHECKER_UPPER_LIMITS[model][1], rel=1e-12)
        assert all(b.maximum is None for name, b in bounds.items() if name != "GEN_LEN")


@pytest.mark.skipif(inference_dir() is None,
                    reason=f"{NOT_AT_HAND}: the checker's constants were not read")
def test_recorded_checker_facts_match_the_checkout() -> None:
    constants = inference_dir() / "tools" / "submission" / "submission_checker" / "constants.py"
    official = runpy.run_path(str(constants))
    assert {name: official["ACC_PATTERN"][name] for name in ACC_PATTERN} == ACC_PATTERN
    config = official["MODEL_CONFIG"]["v6.1"]
    for model in CHECKER_TARGETS:
        assert config["accuracy-target"][model] == pytest.approx(CHECKER_TARGETS[model])
        assert config["accuracy-upper-limit"][model] == pytest.approx(CHECKER_UPPER_LIMITS[model])


# -- prompts --------------------------------------------------------------------------------------

class _Characters:
    """A tokenizer of one id per character, with a chat template of its own: enough to see where each part of a
    prompt lands."""

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        return ([1] if add_bos else []) + [ord(c) for c in text]

    def chat_prompt(self, user_message: str, system: str = "") -> str:
        return f"<user>{user_message}</user>"


def test_prompts_are_the_template_around_the_article_and_a_new_template_makes_them_again(tmp_path: Path) -> None:
    """The substitute's prompt is the reference's template, with the article in it, in the chat template; the
    article's span is what max_input_tokens cuts. Prompts made with another template are refused by name."""
    from dataclasses import replace

    from code.llm_tasks import prompts as task_prompts

    paths = _paths(tmp_path)
    dataset_file("cnndm_sample", paths).parent.mkdir(parents=True)
    rows = [{"id": "a", "article": "One two.", "highlights": "One ."}, {"id": "b", "article": "Three.",
                                                                      "highlights": "Three ."}]
    dataset_file("cnndm_sample", paths).write_text(json.dumps(rows))
    data = BENCHMARK.task_dataset("cnndm_sample")
    source = task_prompts.PromptSource(tokenizer=_Characters, tokenizer_identity="characters", chat_template=True,
                                       closed_prompt=None, template=PROMPT_TEMPLATE)
    made = task_prompts.preprocess(BENCHMARK.name, SUBSTITUTE, data, source, paths, lambda line: None)
    text = _Characters().chat_prompt(PROMPT_TEMPLATE.format(input="One two."))
    head = text.index("One two.")
    assert made.load(0).tolist() == _Characters().encode(text)
    cap = len(text) - 2                  # BOS and the text: 3 tokens over, cut from the article's end
    assert made.capped(cap).load(0).tolist() == _Characters().encode(text[:head + 5] + text[head + 8:])
    manifest = json.loads((made.directory / task_prompts.MANIFEST_FILE).read_text())
    assert manifest["template"] == PROMPT_TEMPLATE
    with pytest.raises(UserError, match="were made by another version or from other inputs") as error:
        task_prompts.preprocessed(BENCHMARK.name, SUBSTITUTE, data, paths, "Summarize: {input}")
    assert 'make preprocess_data RUN_ARGS="--benchmarks=llama3.1-8b' in str(error.value)
    lines: list[str] = []
    task_prompts.preprocess(BENCHMARK.name, SUBSTITUTE, data, replace(source, template="Summarize: {input}"), paths,
                            lines.append)
    assert any("tokenizing 2" in line for line in lines)


def test_the_closed_model_runs_in_process_from_the_users_checkpoint(tmp_path: Path) -> None:
    """Llama-3.1-8B-Instruct is converted into the decoder graph (the task benchmarks' closed models are served
    only): without its checkpoint, make download_model names the folder and the conversion, and fails."""
    paths = _paths(tmp_path)
    spec = BENCHMARK.models[LLAMA]
    assert spec.division == "closed" and not spec.served_only and spec.decoder
    assert spec.starting_weights_filename == "meta-llama/Llama-3.1-8B-Instruct (Hugging Face safetensors)"
    assert get_benchmark("llama2-70b-99.9").models["llama2-70b-chat"].served_only
    with pytest.raises(UserError) as error:
        BENCHMARK.download_model(LLAMA, paths, print)
    folder = paths.model_dir("llama3.1-8b") / "Llama-3.1-8B-Instruct"
    assert error.value.exit_code == 1 and f"checkpoint folder {folder} is missing" in str(error.value)
    assert "make download_model again: it converts it into the decoder graph (fp32, about 32 GB on disk)" in \
        str(error.value)
    assert not paths.model_file("llama3.1-8b", LLAMA).exists()


@pytest.mark.parametrize("benchmark, model, harness", [("qwen3.6-27b", "qwen3.6-27b", "endpoints"),
                                                      ("llama2-70b-99.9", "llama2-70b-chat", "openai")])
def test_a_missing_served_checkpoint_names_its_harness_and_the_substitute(tmp_path: Path, benchmark, model, harness):
    with pytest.raises(UserError) as error:
        get_benchmark(benchmark).download_model(model, _paths(tmp_path), print)
    assert error.value.exit_code == 1 and "is missing" in str(error.value)
    assert f"served by an OpenAI-compatible serving engine (--harness_type={harness})" in str(error.value)
    assert str(error.value).endswith("add --model=smollm2-135m-instruct to RUN_ARGS.")
