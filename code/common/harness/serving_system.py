"""The openai harness's system under test for one test: which servers (running ones from `--endpoints`, or a local
vLLM, or the benchmark's own serving engine, started for the test), the client over them (serving/client.py), and the token-streaming SUT that LoadGen
drives (llm_sut.StreamingSUT) with that client as its one request-level engine."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ..answers import TOKEN_IDS
from ..benchmark_api import generative
from ..constants import Scenario
from ..serving.client import ClientSettings, ServingClient
from ..serving.endpoints import parse_endpoints
from ..serving.payloads import payload_for
from ..serving.read_hold import DEFAULT_WINDOW_US
from ..serving.workers import default_workers
from .llm_sut import PromptLibrary, StreamingSUT

if TYPE_CHECKING:
    from ..answers import AnswerKind
    from ..generation import GenerationSettings


class ServingSUT(StreamingSUT):
    """The streaming SUT over one ServingClient; stops the test's local servers (if any) when it stops."""

    def __init__(self, scenario: Scenario, prompts: PromptLibrary, client: ServingClient,
                 settings: GenerationSettings, servers: Sequence[Any] = (), answer: AnswerKind = TOKEN_IDS) -> None:
        # The client reports every chunk and failure from its event loop's thread: LoadGen is called there, at once.
        super().__init__(scenario, prompts, [client], settings, inline_reports=True, answer=answer)
        self.client = client
        self.servers = list(servers)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            for server in self.servers:
                server.stop()

    def endpoint_records(self) -> list[dict[str, Any]]:
        return self.client.records()


def client_settings(fields, model: str, scenario: Scenario | None = None, endpoints: int = 1) -> ClientSettings:
    """The client's settings from the test's fields; Offline, which measures no first-token time, takes whole
    answers where openai_offline_answers says so, every other scenario streams; openai_workers 0 is a number of
    worker processes for this machine's cores and the `endpoints`."""
    whole = scenario == Scenario.Offline and str(fields.get("openai_offline_answers", "streamed")) == "whole"
    return ClientSettings(model=model, answers="whole" if whole else "streamed",
                          stream_interval=int(fields.get("openai_stream_interval", 0)),
                          worker_read_hold_us=int(fields.get("openai_worker_read_hold_us", DEFAULT_WINDOW_US)),
                          workers=int(fields.get("openai_workers", 1)) or default_workers(endpoints),
                          in_flight=int(fields["openai_in_flight"]),
                          policy=str(fields["openai_scheduler"]),
                          request_timeout_s=float(fields["openai_request_timeout_s"]),
                          metrics_interval_s=float(fields["openai_metrics_interval_s"]),
                          warmup_requests=int(fields["openai_warmup_requests"]),
                          token_ids=str(fields["openai_token_ids"]))


def text_encoder(run):
    """The benchmark's tokenizer as `text -> ids` (no BOS), for servers that stream text only; None without one."""
    tokenizer = generative(run.benchmark).tokenizer(run.spec.model, run.paths)
    return TextEncoder(tokenizer) if tokenizer is not None else None


class TextEncoder:
    """`text -> ids` with a tokenizer, no BOS; an object (not a closure) so that worker processes get it too."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_bos=False)


def serving_system(run):
    """(SUT, QSL) of an openai harness test, the SUT started (every endpoint checked, probed and warmed up)."""
    spec, fields = run.spec, run.fields
    samples = run.samples
    if fields.get("max_input_tokens"):
        samples = samples.capped(int(fields["max_input_tokens"]))
    prompts = PromptLibrary(samples, spec.performance_sample_count)
    model_spec = run.benchmark.models[spec.model]
    model = model_spec.served_name or spec.model
    api = payload_for(frozenset(model_spec.prompt_parts), model_spec.serving_api,
                      generative(run.benchmark).serving_request(spec.model, run.paths))
    urls = list(spec.harness_options.get("endpoints", ()))
    servers = []
    if not urls:
        from ..serving.local_server import start_for_test

        servers = [start_for_test(run)]
        urls = [servers[0].endpoint]
    try:
        endpoints = parse_endpoints(urls)
        local = endpoints if servers else ()
        settings = client_settings(fields, model, spec.scenario_enum, len(endpoints))
        answer = generative(run.benchmark).answer(spec.model, run.paths)
        client = ServingClient(endpoints, settings, run.generation, samples.load(0),
                               encode=text_encoder(run), local=local, api=api,
                               model_folder_sha256=servers[0].model_folder_sha256 if servers else "",
                               answer_text=answer.reported)
        sut = ServingSUT(spec.scenario_enum, prompts, client, run.generation, servers, answer=answer).start()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return sut, prompts
