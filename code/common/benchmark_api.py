"""What the generic harness needs from a benchmark: models, data sets, preprocessing, responses, scoring.

Each benchmark package (code/resnet50/, code/yolo/, ...) provides one `Benchmark` object, registered in
`IMPLEMENTATIONS`. The harness, engine builders, audit and submission code talk to benchmarks only through this
interface; nothing in them knows what a class id or a bounding box is. `documentation/adding_a_benchmark.md`
says how to add one, and tests/test_benchmark_contract.py checks every registered benchmark against it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Protocol, Sequence, Union, cast

import numpy as np

from .errors import EXIT_FAILURE, UserError
from .paths import Paths
from .prompts import TOKEN_IDS
from .registry import Registry

if TYPE_CHECKING:
    from .answers import AnswerKind
    from .generation import GenerationSettings, RequestEngine

Log = Callable[[str], None]


@dataclass(frozen=True)
class Padding:
    """How the varying axes of an input become one size in a batch: each is padded with `value` to the batch's
    longest sample, or, with `buckets`, to the smallest bucket that holds it (fewer distinct shapes, for runtimes
    that prepare each shape once; a sample longer than the largest bucket fails the run)."""

    value: float = 0                     # in the input's dtype
    buckets: tuple[int, ...] = ()

    def size(self, longest: int) -> int:
        """The size of a varying axis in a batch whose longest sample has `longest` along it."""
        if not self.buckets:
            return longest
        fitting = [bucket for bucket in sorted(self.buckets) if bucket >= longest]
        if not fitting:
            raise ValueError(f"a sample of {longest} along a varying axis is longer than the largest bucket "
                             f"({max(self.buckets)})")
        return fitting[0]


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a model, for one sample (no batch axis). None in `shape`: that axis varies from sample
    to sample; `padding` says how an input's varying axes are made one size in a batch (None: the samples of a
    batch must have one shape)."""

    name: str
    dtype: str                           # numpy dtype name, e.g. "float32"
    shape: tuple[int | None, ...]
    padding: Padding | None = None

    @property
    def fixed(self) -> bool:
        return all(size is not None for size in self.shape)


@dataclass(frozen=True)
class ServingNeeds:
    """What a served model needs from its server beyond the rules' common settings (serving/engines.py turns it into
    each engine's flags)."""

    # Images one prompt may carry at most, more refused by the server (vLLM --limit-mm-per-prompt); 0: a text model.
    images_per_prompt: int = 0
    # The rules take the model's own sampling defaults (its generation_config.json, applied where a request sets
    # none: vLLM --generation-config auto) instead of the engine's neutral ones.
    model_sampling_defaults: bool = False
    # GPUs one server spans on GPU nodes, as the reference and the published submissions run it (the command lines
    # make serve_llm prints there; a local CPU server is one process).
    tensor_parallel: int = 1
    # The server's parser of the model's tool calls, for a benchmark whose requests carry tools (vLLM
    # --tool-call-parser, e.g. "hermes"); "": its requests carry none.
    tool_call_parser: str = ""


@dataclass(frozen=True)
class ModelSpec:
    name: str                      # e.g. "mobilenet_v2", "resnet50_v1.5", "nanodet-m"
    description: str
    division: str                  # "closed" (the round's reference model) or "open"
    # The named inputs, in the order the harness hands them to backends (a backend feeds them by name).
    inputs: tuple[TensorSpec, ...]
    # Facts for measurements.json of a submission.
    starting_weights_filename: str
    weight_transformations: str
    retraining: str = "No"
    # What the model gives back (for people and the contract test: backends return every output, in the
    # model's order, and the benchmark's postprocess matches them by shape, as converters rename outputs).
    outputs: tuple[TensorSpec, ...] = ()
    # The largest batch the model takes (None: any); e.g. 1 for a graph exported with a fixed batch axis.
    max_batch_size: int | None = None
    # Records in one sample's response, typically, where it differs from the benchmark's ResponseFormat (a
    # detector keeping up to 300 boxes instead of 100): sizes the accuracy log in the run plan.
    typical_response_records: int | None = None
    # An LLM decoder graph with a KV cache (the contract of code/common/decoder_graph.py), run token by token
    # through code.common.generation rather than one fixed-size batch at a time.
    decoder: bool = False
    # What serving engines serve it as (its Hugging Face id): the model the openai harness asks its servers for.
    served_name: str = ""
    # Only serving engines run it (a checkpoint too large for the in-process decoder graph; --harness_type=openai).
    served_only: bool = False
    # What a prompt of a model that generates is made of (prompts.PARTS): token ids (every text benchmark), or chat
    # content such as ("text", "image") for a vision-language model; the engines that cannot take them refuse the
    # test before it starts. Its samples load as prompts.Prompt (token arrays, or prompts.Chat).
    prompt_parts: tuple[str, ...] = (TOKEN_IDS,)
    # The serving API its prompts go to (serving/payloads.py: completions, chat, transcriptions); "": the one its
    # prompt parts choose.
    serving_api: str = ""
    # What serving engines are started with for it beyond the rules' common settings (serving/engines.py).
    serving: ServingNeeds = ServingNeeds()


@dataclass(frozen=True)
class ResponseFormat:
    """What one sample's response is in the accuracy log: `records` of `fields`, each field one `dtype` value.

    `records_per_sample` None means the count varies per sample (e.g. one record per detected object, none for
    an image without any); `typical_records` then sizes the accuracy log in the run plan. The official
    TEST01 script compares only the first value of each response; `fields[0]` says what that value is."""

    dtype: str                               # numpy dtype name of every value
    fields: tuple[str, ...]                  # the values of one record, in order
    records_per_sample: int | None = 1
    typical_records: int = 1

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def record_bytes(self) -> int:
        return len(self.fields) * self.np_dtype.itemsize

    @property
    def typical_bytes(self) -> int:
        records = self.records_per_sample if self.records_per_sample is not None else self.typical_records
        return records * self.record_bytes

    @property
    def variable(self) -> bool:
        return self.records_per_sample is None

    def decode(self, data: bytes) -> np.ndarray:
        """One response's bytes as an array of records (records x fields)."""
        return np.frombuffer(data, self.np_dtype).reshape(-1, len(self.fields))


@dataclass(frozen=True)
class Responses:
    """The responses of several samples back to back in one buffer: sample i is `data[offsets[i]:offsets[i+1]]`
    (byte offsets). The SUT hands LoadGen addresses into `data`, computed with numpy: nothing is copied per sample."""

    data: np.ndarray        # contiguous, any dtype; read as bytes
    offsets: np.ndarray     # int64, one more than there are samples, starting at 0

    def __post_init__(self) -> None:
        if not self.data.flags.c_contiguous:
            raise ValueError("Responses.data must be one contiguous buffer (LoadGen reads it by address)")
        if self.offsets.ndim != 1 or len(self.offsets) < 1 or self.offsets[0] != 0 \
                or int(self.offsets[-1]) > self.data.nbytes:
            raise ValueError(f"Responses.offsets must start at 0 and end within the {self.data.nbytes} bytes of data")

    @classmethod
    def rows(cls, rows: np.ndarray) -> "Responses":
        """Fixed-size responses: row i of `rows` is sample i's response."""
        rows = np.ascontiguousarray(rows)
        size = rows.nbytes // max(len(rows), 1) if rows.ndim else rows.nbytes
        return cls(rows, np.arange(len(rows) + 1, dtype=np.int64) * size)

    @classmethod
    def pieces(cls, pieces: Sequence[np.ndarray]) -> "Responses":
        """Variable-size responses, one array per sample (possibly empty), joined in one numpy call."""
        sizes = np.fromiter((p.nbytes for p in pieces), dtype=np.int64, count=len(pieces))
        offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        flat = [np.ascontiguousarray(p).reshape(-1).view(np.uint8) for p in pieces]
        return cls(np.concatenate(flat) if flat else np.zeros(0, np.uint8), offsets)

    @classmethod
    def join(cls, parts: Sequence["Responses"]) -> "Responses":
        """Several batches' responses as one (a work item of several batches completes in one LoadGen call)."""
        if len(parts) == 1:
            return parts[0]
        data = np.concatenate([np.ascontiguousarray(p.data).reshape(-1).view(np.uint8) for p in parts])
        starts = np.cumsum([0] + [int(p.offsets[-1]) for p in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, starts)])
        return cls(data, offsets.astype(np.int64))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def sample(self, index: int) -> bytes:
        raw = np.ascontiguousarray(self.data).reshape(-1).view(np.uint8)
        return raw[self.offsets[index]:self.offsets[index + 1]].tobytes()


@dataclass(frozen=True)
class DatasetSpec:
    name: str                      # e.g. "foolbox20", "imagenet_sample", "imagenet", "coco_mini"
    description: str
    how_to_get: str                # one paragraph a person can follow
    sample_count: int | None = None   # samples of the whole set, known before it is downloaded (None: unknown)


@dataclass(frozen=True)
class Metric:
    name: str                      # e.g. "top-1 accuracy", "mAP", "AP50"
    value: float
    unit: str = "%"                # "%" or "" (a plain number)

    def __str__(self) -> str:
        return f"{self.name} {self.value:.3f}{self.unit}"


@dataclass(frozen=True)
class AccuracyResult:
    """A scored accuracy log. `metrics[0]` is the one the round's accuracy target applies to, in the unit of the
    round's reference value (e.g. percent); `text` is the whole accuracy.txt, whose lines include the one the
    round's checker reads with its regular expression (e.g. `accuracy=76.456%, good=..., total=...`, `mAP=...%`)."""

    metrics: tuple[Metric, ...]
    text: str
    samples: int                   # distinct samples scored

    @property
    def metric(self) -> str:
        return self.metrics[0].name

    @property
    def value(self) -> float:
        return self.metrics[0].value

    def get(self, name: str) -> float | None:
        return next((m.value for m in self.metrics if m.name == name), None)


# One preprocessed sample: {input name: array} (no batch axis); a single-input model's may be its one array.
Sample = Union[np.ndarray, Mapping[str, np.ndarray]]


class PreprocessedSet(Protocol):
    """Preprocessed samples on disk, in QSL index order (named_inputs.named_sample reads one as {input: array})."""

    directory: Path

    def __len__(self) -> int: ...

    def load(self, index: int) -> Sample: ...


Postprocess = Callable[[Sequence[np.ndarray], np.ndarray], Responses]   # (outputs of a batch, its QSL indices)


@dataclass(frozen=True)
class ServingFolder:
    """A model as OpenAI-compatible serving engines (vLLM, SGLang, trtllm-serve) load it: a Hugging Face folder."""

    folder: Path                  # config.json, tokenizer files, *.safetensors
    files: tuple[str, ...]        # its files whose digests are recorded (the weights first)
    dtype: str                    # the dtype to serve it in, as the engines name it ("float32", "bfloat16")
    max_model_len: int            # prompt plus output tokens the server must hold per sequence
    made_by_toolkit: bool         # written by the toolkit (made again when damaged) or the user's checkpoint


class Benchmark(Protocol):
    name: str                                  # toolkit benchmark name, e.g. "resnet50"
    # Whether it generates tokens (an LLM): its `generation` gives settings, its samples are prompts, the harness
    # streams tokens, and the generation fields (fields.py, `generative`) apply to it.
    generates_tokens: bool
    models: Mapping[str, ModelSpec]
    datasets: Mapping[str, DatasetSpec]
    response: ResponseFormat                   # each sample's response in the accuracy log
    # What `make run` runs for this benchmark when the user names no model or data set: a model and data set
    # that a fresh clone can get without registration (e.g. {"model": "mobilenet_v2", "dataset": "foolbox20"}),
    # and the speed hints of that model where they differ from the configs' (written for the configs' model),
    # e.g. {"offline_expected_qps": PerCore(30.0)}.
    embedded_default: Mapping[str, Any]
    # The benchmark's own defaults of catalogue fields: what its reference does where no config class or command
    # line says otherwise (an LLM's output cap), between the config classes and the catalogue's defaults. A value
    # the reference sets per kind of run is a config_registry.ByTestMode (gpt-oss-120b: 32768 output tokens in
    # accuracy runs, 10240 in the others). Optional: a benchmark without defaults of its own need not define it.
    field_defaults: Mapping[str, Any]

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        """Make the model's ONNX file exist at paths.model_file(...) and return it, or raise UserError saying how."""

    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        """Make the raw data set available under paths.dataset_dir(dataset), or raise UserError saying how."""

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedSet:
        """Write (or reuse, when up to date) the preprocessed tensors and map file."""

    def preprocessed(self, model: str, dataset: str, paths: Paths) -> PreprocessedSet:
        """Open preprocessed data; UserError naming `make preprocess_data` when it is missing or stale."""

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> Sequence[int]:
        """Indices (into the preprocessed set) of the calibration list for INT8 engines."""

    def calibration_samples(self, model: str, dataset: str, count: int, paths: Paths) -> Iterator[Sample]:
        """Preprocessed calibration samples (no batch axis), in calibration-list order.

        What engine builders call: it also covers calibration data outside the evaluation set."""

    def postprocessor(self, model: str, samples: PreprocessedSet) -> Postprocess:
        """The function that turns one batch's backend outputs (every output, in the model's order) and the
        batch's QSL indices into its responses; `samples` gives per-sample facts (e.g. an image's size)."""

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        """Score an mlperf_log_accuracy.json as the round's accuracy script does."""

    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> "GenerationSettings | None":
        """For a benchmark that generates tokens (an LLM): how the harness generates with `model` under the
        resolved config `fields` (output cap, EOS ids from the model's tokenizer under `paths`, batch). The
        harness then streams tokens (continuous batching, first-token and per-token latencies) instead of running
        fixed-size batches, `preprocessed` samples are prompts (code/common/prompts.py: 1-D token arrays, or chats
        of text, images and audio, as the model's `prompt_parts` say) and responses are its answers, as its answer
        kind makes them (GenerativeBenchmark, whose face declares the rest). None for every other benchmark."""

    def serving_folder(self, model: str, paths: Paths, log: Log, remake: bool = False) -> ServingFolder:
        """For a benchmark that generates tokens: the model as a Hugging Face folder for serving engines, made
        (or made again with `remake`) where the toolkit writes it; UserError saying how to get it otherwise."""

    def int8_preprocessing(self) -> Any:
        """The module that writes and reads the int8 form of its preprocessed set for TensorRT INT8 engines
        (`preprocess_int8`, `preprocessed_int8`); UserError where it has none."""

    def compliance_dataset(self, test: str, dataset: str) -> str | None:
        """The data set a compliance test that scores a data set of its own (TEST07: gpt-oss-120b's GPQA
        compliance set) runs on and is scored against, for a submission run on `dataset` (e.g. the small sample's
        counterpart for a sample); None: the benchmark has none, and the test cannot run. Optional: a benchmark
        without such a test need not define it."""

    def prepared_size(self, model: str, dataset: str, paths: Paths) -> int | None:
        """Samples of `dataset` as it is prepared here (counted from its files, nothing decoded), so that a set that
        is not the published one (`DatasetSpec.sample_count`) is planned, recorded and staged as a subset; None
        where it is not prepared or not counted (the published count is then taken)."""


class PackagedBenchmark:
    """What a benchmark package delegates the same way, to its own modules `<package>.models` (download_model),
    `<package>.datasets` (download_data, calibration_indices) and `<package>.preprocessing` (preprocess,
    preprocessed), each imported on first use. A subclass sets `package`, `name`, `models`, `datasets`,
    `response` and `embedded_default`, and writes `postprocessor` and `score`."""

    package: str                               # e.g. "code.resnet50"
    generates_tokens: bool = False
    int8_inputs: bool = False                  # its preprocessing module has an int8 input form
    field_defaults: Mapping[str, Any] = MappingProxyType({})   # none of its own: the catalogue's

    def _module(self, name: str):
        return importlib.import_module(f"{self.package}.{name}")

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        return self._module("models").download_model(model, paths, log)

    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        return self._module("datasets").download_data(dataset, paths, log)

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedSet:
        return self._module("preprocessing").preprocess(model, dataset, paths, log)

    def preprocessed(self, model: str, dataset: str, paths: Paths) -> PreprocessedSet:
        return self._module("preprocessing").preprocessed(model, dataset, paths)

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> Sequence[int]:
        return self._module("datasets").calibration_indices(dataset, count, paths)

    def calibration_samples(self, model: str, dataset: str, count: int, paths: Paths) -> Iterator[Sample]:
        """The `calibration_indices` samples of the preprocessed evaluation set, in calibration-list order (a
        benchmark whose calibration data lies outside its evaluation set overrides this)."""
        samples = self.preprocessed(model, dataset, paths)
        for index in self.calibration_indices(dataset, count, paths):
            yield samples.load(index)

    def int8_preprocessing(self) -> Any:
        if not self.int8_inputs:
            raise UserError(f"{self.name} has no int8 input form yet: use --input_dtype=fp32.", exit_code=EXIT_FAILURE)
        return self._module("preprocessing")

    def compliance_dataset(self, test: str, dataset: str) -> str | None:
        """No compliance data set of its own (see Benchmark.compliance_dataset)."""
        return None

    def prepared_size(self, model: str, dataset: str, paths: Paths) -> int | None:
        """Not counted: the published count is taken (see Benchmark.prepared_size)."""
        return None

    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> "GenerationSettings | None":
        """Fixed-size models generate nothing (see Benchmark.generation)."""
        return None

    def serving_folder(self, model: str, paths: Paths, log: Log, remake: bool = False) -> ServingFolder:
        """Only models that generate tokens are served by LLM serving engines."""
        raise UserError(f"Benchmark {self.name} does not generate tokens: its model {model} is not served by an "
                        f"LLM serving engine (vLLM, SGLang, trtllm-serve).")


class TextEncoder(Protocol):
    """A model's tokenizer as the openai harness uses it: the ids of a server's text, without a BOS."""

    def encode(self, text: str, add_bos: bool = True) -> list[int]: ...


class GenerativeBenchmark(PackagedBenchmark):
    """The generative face of the interface: what the token-streaming harnesses ask of a benchmark that generates
    (`generates_tokens`), each member declared here with its default, never probed for.

    - `generation`: how to generate with a model under a resolved config (output cap, EOS ids, batch, sampling);
    - `tokenizer`: text -> ids for servers that stream text only (None: it has none, such servers are refused);
    - `own_engines` / `request_engines`: in-process request-level engines of its own (none by default: the LLM
      harnesses' decoder graph runs it), the first name the default;
    - `serving_folder` and each model's `ModelSpec.serving` (ServingNeeds): what serving engines load and need;
    - `own_server` / `start_server` / `serving_request`: a serving engine of its own for the openai harness (none:
      vLLM serves it) and what each request to its serving API carries beyond the prompt;
    - `answer`: its one kind of answer (answers.py) and so its responses in the accuracy log: token ids by
      default, text, labels made from text, or content its engines make (a tensor, a media file).
    A generative benchmark's responses come from its answers, never from a batch's outputs: it has no
    postprocessor."""

    generates_tokens = True
    own_engines: tuple[str, ...] = ()
    # The MLCommons endpoints client serves it (`endpoints_workload`), and whether the round runs it on that client
    # only (no LoadGen harness runs it then).
    endpoints_served: bool = False
    endpoints_only: bool = False
    # The JSON schema response format the reference's guided decoding asks of a server (--use_guided_decoding);
    # None: the reference defines none, and the flag is refused.
    guided_response_format: Mapping[str, Any] | None = None
    # The name of a serving engine of its own behind its serving API (e.g. "diffusers"): the openai harness starts
    # it here for a test without --endpoints, and make serve_llm serves it (`start_server`); "": vLLM's CPU build.
    own_server: str = ""

    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> "GenerationSettings":
        raise NotImplementedError

    def tokenizer(self, model: str, paths: Paths) -> TextEncoder | None:
        """None: it has no tokenizer (servers must return their token ids)."""
        return None

    def request_engines(self, model: str, fields: Mapping[str, Any], paths: Paths, *, instances: int,
                        threads: int) -> "list[RequestEngine]":
        """The in-process engines of a test, one per instance (only where `own_engines` names some)."""
        raise UserError(f"{self.name} has no in-process engines of its own; its model runs on the LLM harnesses.")

    def make_environment(self, paths: Paths, log: Log) -> None:
        """Make (or check, when up to date) the environment its own engines and server run in beyond .venv (make
        build, make run); none by default."""

    def serving_request(self, model: str, paths: Paths) -> Mapping[str, Any]:
        """What every request to its serving API (ModelSpec.serving_api) carries beyond the prompt: the reference's
        generation fields where the API takes them as such (a video's size and steps); none by default."""
        return {}

    def start_server(self, model: str, fields: Mapping[str, Any], paths: Paths, port: int, host: str,
                     log: Log) -> Any:
        """Its own serving engine (`own_server`) serving `model` on host:port, returned once it answers: a
        processes.ServerProcess with `endpoint`, `served_name` and `log_path`."""
        raise UserError(f"{self.name} has no serving engine of its own; vLLM serves its model.")

    def endpoints_workload(self, model: str, accuracy: bool, fields: Mapping[str, Any], paths: Paths,
                           run_dir: Path, test_run: bool, *, scenario: str = "") -> Any:
        """What the endpoints client runs for one test of it in `scenario` (a ClientWorkload,
        endpoints_client/workload.py, of the plug-in layer above this one); files it needs (a trimmed data set) are
        written into `run_dir`. UserError where the client serves no test of it (`endpoints_served` False)."""
        raise UserError(f"{self.name} is not a benchmark the MLCommons endpoints client serves in this toolkit; run "
                        f"it with another --harness_type.")

    def endpoints_load(self, model: str, accuracy: bool, fields: Mapping[str, Any], test_run: bool, *,
                       scenario: str = "") -> Any:
        """What the endpoints client will issue in one test of it, known before it runs (a ClientLoad,
        endpoints_client/workload.py), for the plan's estimate; None where unknown (the plan then estimates the test
        as LoadGen's)."""
        return None

    def endpoints_artefacts(self, model: str, fields: Mapping[str, Any], paths: Paths, report_dir: Path,
                            run_dir: Path) -> None:
        """After an accuracy test on the endpoints client passed: the files beside its report an endpoints tree's
        accuracy/ carries (the rules' accuracy_artefacts, e.g. a video benchmark's audit videos), written into
        `run_dir` from the client's report; none by default."""

    def answer(self, model: str, paths: Paths) -> "AnswerKind":
        """Its kind of answer (answers.py); the generated token ids unless it says otherwise."""
        from .answers import TOKEN_IDS

        return TOKEN_IDS

    def postprocessor(self, model: str, samples: PreprocessedSet) -> Postprocess:
        raise UserError(f"{self.name} generates: its responses are its answers (GenerativeBenchmark.answer), not a "
                        f"batch's outputs.")


def generative(benchmark: "Benchmark") -> GenerativeBenchmark:
    """The generative face of a benchmark that generates (`generates_tokens`); ValueError for any other."""
    if not benchmark.generates_tokens:
        raise ValueError(f"benchmark {benchmark.name} does not generate: it has no generative face")
    return cast(GenerativeBenchmark, benchmark)


def endpoints_only(benchmark: "Benchmark") -> bool:
    """Whether the round runs `benchmark` on the MLCommons endpoints client only (GenerativeBenchmark.endpoints_only):
    no LoadGen harness runs it."""
    return bool(benchmark.generates_tokens) and generative(benchmark).endpoints_only




# name -> "module:attribute" of its Benchmark object, imported on first use. A benchmark outside code/ registers
# itself the same way from its own module.
IMPLEMENTATIONS: "Registry[Benchmark]" = Registry(
    "benchmark", unknown=lambda name: f"Benchmark '{name}' has no implementation in this toolkit yet.", entries={
        "resnet50": "code.resnet50.benchmark:BENCHMARK",
        "yolo": "code.yolo.benchmark:BENCHMARK",
        "llama3.1-8b": "code.llama3_1_8b.benchmark:BENCHMARK",
        "llama3.1-8b-edge": "code.llama3_1_8b.benchmark:EDGE_BENCHMARK",
        "llama2-70b-99.9": "code.llama2_70b.benchmark:BENCHMARK",
        "deepseek-r1": "code.deepseek_r1.benchmark:BENCHMARK",
        "gpt-oss-120b": "code.gpt_oss_120b.benchmark:BENCHMARK",
        "qwen3-vl-235b-a22b": "code.qwen3_vl.benchmark:BENCHMARK",
        "qwen3.6-27b": "code.qwen3_6.benchmark:BENCHMARK",
        "whisper": "code.whisper.benchmark:BENCHMARK",
        "wan-2.2-t2v-a14b": "code.wan.benchmark:BENCHMARK",
    })


def samples_for_run(samples: PreprocessedSet, accuracy: bool, audit_test: str | None) -> PreprocessedSet:
    """The samples a run reads. A preprocessed set that holds one sample list per kind of run (gpt-oss-120b reads
    other prompts in accuracy runs and in TEST07 than in performance runs) has `for_run(accuracy, audit_test)`;
    every other set is the same for every run."""
    chooser = getattr(samples, "for_run", None)
    return chooser(accuracy, audit_test) if chooser is not None else samples


def get_benchmark(name: str) -> Benchmark:
    """The implementation of a benchmark, imported on first use."""
    return IMPLEMENTATIONS.get(name)


def generates_tokens(name: str) -> bool:
    """Whether the registered benchmark `name` generates tokens (False for a name not registered)."""
    return name in IMPLEMENTATIONS and bool(get_benchmark(name).generates_tokens)


def iter_batches(indices: Sequence[int], batch_size: int) -> Iterator[Sequence[int]]:
    for start in range(0, len(indices), batch_size):
        yield indices[start:start + batch_size]
