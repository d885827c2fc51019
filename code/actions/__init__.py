"""The table of actions: `make <target>` -> `python3 -m code.main --action=<target>` -> one handler.

Handlers are named as "module:Class" and imported only when their action runs, so `--help` and
argument errors never pay for heavy imports.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass



@dataclass(frozen=True)
class Action:
    name: str
    summary: str
    handler: str | None = None        # "module:Class" under code.actions
    planned_in: str | None = None     # capability that brings it, for actions not implemented yet

    def load(self):
        module, _, cls = self.handler.partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), cls)


ACTIONS: dict[str, Action] = {a.name: a for a in (
    Action("prebuild", "Set up the local environment where no docker engine runs (make prebuild)",
           "environment:Prebuild"),
    Action("build", "Finish the environment and print which backends work here", "environment:Build"),
    Action("link_dirs", "Link data, models and preprocessed_data of MLPERF_SCRATCH_PATH into build/",
           "environment:LinkDirs"),
    Action("show_config", "Print the resolved config of each selected benchmark and scenario, with sources",
           "show_config:ShowConfig"),
    Action("add_custom_system", "Register this machine and write config stubs for it", "custom_system:AddCustomSystem"),
    Action("download_model", "Fetch the model of each selected benchmark", "harness:DownloadModel"),
    Action("download_data", "Fetch the data set, or say where to get it", "harness:DownloadData"),
    Action("preprocess_data", "Write preprocessed tensors and map files", "harness:PreprocessData"),
    Action("generate_engines", "Build the engine (ONNX Runtime model or TensorRT plan)", "harness:GenerateEngines"),
    Action("selftest_gpu", "On an NVIDIA GPU: streams, events, pinned and device memory checked with a byte round "
           "trip on every GPU; where TensorRT is installed, also small plans (fp32, fp16, int8) run on two streams "
           "and compared with ONNX Runtime", "selftest_gpu:SelftestGpu"),
    Action("calibrate", "Regenerate the INT8 calibration cache", "harness:Calibrate"),
    Action("run_harness", "Run the selected benchmarks through LoadGen", "harness:RunHarness"),
    Action("run", "Main job: prepare and run the embedded default benchmark end to end", "harness:Run"),
    Action("bench", "Measure the harness: overhead, Offline throughput and SingleStream latency vs raw ONNX Runtime, "
           "best Server QPS vs Offline (INT8, FP32)",
           "bench:Bench"),
    Action("find_peak", "Find each selected scenario's peak setting with short runs, confirm it at full length, "
           "write it into this system's custom config", "find_peak:FindPeak"),
    Action("tune", "Find each selected scenario's best engine layout (batch size, instances x threads, Server "
           "batching window) with short runs, confirm it at full length, write it into this system's custom config",
           "tune:Tune"),
    Action("serve_triton", "Serve one benchmark's engine from a Triton server on this node until stopped (the "
           "Triton harness's scale-out: --endpoints)", "triton:ServeTriton"),
    Action("serve_llm", "Serve one LLM benchmark's model from an OpenAI-compatible server (vLLM's CPU build) on "
           "this node until stopped, or print the vLLM, SGLang or trtllm-serve command for GPU nodes (the openai "
           "harness's --endpoints); a benchmark with a server of its own (wan-2.2's videos) is served by it",
           "serve_llm:ServeLlm"),
    Action("run_audit_harness", "Run and verify the compliance tests", "audit:RunAuditHarness"),
    Action("report", "Write an HTML report with plots of the runs in build/logs and print a summary table",
           "report:Report"),
    Action("generate_conf_files", "Write measurements/ (measurements.json, user.conf, README.md)",
           "submission:GenerateConfFiles"),
    Action("stage_results", "Copy the best valid runs into the submission staging tree", "submission:StageResults"),
    Action("stage_compliance", "Copy the compliance verdicts and logs into the staging tree",
           "submission:StageCompliance"),
    Action("truncate_results", "Back up and truncate the accuracy logs", "submission:TruncateResults"),
    Action("export_submission", "Write a pristine submission tree to build/submission", "submission:ExportSubmission"),
    Action("check_submission", "Check the exported tree against the round's rules", "submission:CheckSubmission"),
    Action("pack_submission", "Write the submission tarball and its checksum", "submission:PackSubmission"),
    Action("clean", "Remove build outputs (engines, logs, staging); keeps the scratch data and .venv",
           "environment:Clean"),
)}

# Names that older guides still use, and the action each one is now: the old name runs the current action and says
# its current name once.
RENAMED: dict[str, str] = {
    "update_results": "stage_results",
    "update_compliance": "stage_compliance",
    "copy_results_artifacts": "export_submission",
}


def current_names(argv: list[str]) -> tuple[list[str], str | None]:
    """`argv` with an old action name replaced by the current one, and the sentence that says so (None if none)."""
    for index, flag in enumerate(argv):
        old = flag.partition("=")[2] if flag.startswith("--action=") else None
        if old in RENAMED:
            current = RENAMED[old]
            return ([*argv[:index], f"--action={current}", *argv[index + 1:]],
                    f"`make {old}` is now called `make {current}`: running {current}.")
    return argv, None
