"""The openai harness's client of serving engines, on the toolkit's own streaming test servers (real HTTP on the
loopback): endpoints, scheduling, metrics, the token ids of a stream, and every fault an endpoint can show, each of
which fails the run with the endpoint named and never hangs."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from code.common.errors import UserError
from code.common.generation import GenerationSettings, Request
from code.common.serving.client import SERVER_IDS, TEXT_IDS, ClientSettings, EndpointFailed, ServingClient, serving
from code.common.serving.endpoints import parse_endpoint, parse_endpoints
from code.common.serving.metrics import MetricsWatch, parse
from code.common.serving.scheduler import Scheduler
from code.common.serving.fake_server import ServerSettings, StreamingServer, encode_test_text, output_ids

EOS = 2
GENERATION = GenerationSettings(max_new_tokens=8, eos_token_ids=(EOS,))
WAIT_S = 30


# -- endpoints, scheduling, metrics ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, url", [("http://node1:8000", "http://node1:8000"), ("node1:8000", "http://node1:8000"),
                                       ("https://n:443/v1/", "https://n:443"), ("[::1]:8000", "http://[::1]:8000")])
def test_an_endpoint_is_a_base_url(text, url):
    assert parse_endpoint(text).url == url


@pytest.mark.parametrize("text", ["node1", "http://node1", "ftp://node1:21", "http://node1:8000/generate",
                                  "http://node1:99999", ""])
def test_a_malformed_endpoint_names_the_flag_and_the_form(text):
    with pytest.raises(UserError, match="--endpoints"):
        parse_endpoint(text)


def test_a_server_named_twice_is_refused(other_nodes):
    with pytest.raises(UserError, match="twice"):
        parse_endpoints(["http://a:8000", "a:8000"])


@pytest.mark.parametrize("first, second", [
    ("http://127.0.0.1:8000", "http://localhost:8000"),     # loopback by address and by name
    ("http://0.0.0.0:8000", "http://127.0.0.1:8000"),       # the wildcard address a server binds to is this machine
    ("http://[::1]:8000", "127.0.0.1:8000"),
    ("http://node1:8000", "http://node1-ib:8000"),          # two names of one machine
    ("http://node2:8000", "http://10.0.0.2:8000/v1"),       # a name and its address
])
def test_one_server_under_two_names_is_refused_naming_both(other_nodes, first, second):
    with pytest.raises(UserError) as refused:
        parse_endpoints([first, "http://node2:9000", second])
    message = str(refused.value)
    assert refused.value.exit_code == 2 and "twice" in message and "port 8000" in message
    assert parse_endpoint(first).url in message and parse_endpoint(second).url in message


def test_several_servers_of_one_machine_are_one_node(other_nodes):
    from code.common.serving.machines import THIS_MACHINE, count_machines, machine_key

    urls = ["http://127.0.0.1:8000", "http://localhost:8001", "http://node1:8000", "http://node1-ib:8001",
            "http://node2:8000"]
    assert len(parse_endpoints(urls)) == 5           # other ports: five servers
    assert count_machines(["127.0.0.1", "localhost", "node1", "node1-ib", "node2"]) == 3
    assert machine_key("localhost") == machine_key("0.0.0.0") == THIS_MACHINE
    assert machine_key("node1-ib") == "10.0.0.1" and count_machines([]) == 1


def test_a_name_that_does_not_resolve_is_refused_naming_it():
    with pytest.raises(UserError) as refused:
        parse_endpoints(["http://127.0.0.1:8000", "http://no-such-host.invalid:8000"])
    assert refused.value.exit_code == 2 and "'no-such-host.invalid' does not resolve" in str(refused.value)


def test_the_run_refuses_one_server_under_two_names_before_anything_runs(tmp_path, capsys):
    from code.main import main

    port = 18_000
    code = main(["--action=run_harness", "--benchmarks=llama3.1-8b", "--harness_type=openai",
                 f"--endpoints=http://127.0.0.1:{port},http://localhost:{port}", f"--log_dir={tmp_path / 'logs'}"])
    err = capsys.readouterr().err
    assert code == 2 and f"http://127.0.0.1:{port}" in err and f"http://localhost:{port}" in err
    assert not (tmp_path / "logs").exists()


def test_the_policies_pick_as_they_say():
    rr = Scheduler("round_robin", 3, 2)
    assert [rr.pick(1) for _ in range(6)] == [0, 1, 2, 0, 1, 2] and rr.pick(1) is None   # two each, then full
    rr.done(1, 1)
    assert rr.pick(1) == 1                       # the freed slot
    fewest = Scheduler("fewest_requests", 2, 10)
    assert [fewest.pick(1) for _ in range(4)] == [0, 1, 0, 1]
    fewest.done(0, 1)
    fewest.done(0, 1)
    assert fewest.pick(1) == 0
    tokens = Scheduler("fewest_input_tokens", 2, 10)
    assert tokens.pick(1000) == 0 and tokens.pick(10) == 1 and tokens.pick(10) == 1 and tokens.pick(10) == 1
    assert tokens.requests_in_flight() == [1, 3]
    with pytest.raises(ValueError, match="round_robin, fewest_requests, fewest_input_tokens"):
        Scheduler("random", 1, 1)


VLLM_METRICS = """# TYPE vllm:request_success counter
vllm:request_success_total{{finished_reason="stop",model_name="m"}} {stop}
vllm:request_success_total{{finished_reason="length",model_name="m"}} {length}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} {running}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{model_name="m"}} 0
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{{model_name="m"}} {queue}
vllm:request_queue_time_seconds_count{{model_name="m"}} {count}
"""


def test_metrics_keep_what_the_run_added_and_the_peaks():
    watch = MetricsWatch()
    watch.add(parse(VLLM_METRICS.format(stop=5, length=5, running=0, queue=1.0, count=10)))
    watch.add(parse(VLLM_METRICS.format(stop=20, length=10, running=7, queue=3.0, count=30)))
    watch.add(parse(VLLM_METRICS.format(stop=25, length=15, running=2, queue=5.0, count=40)))
    summary = watch.summary()
    assert summary["requests_succeeded"] == 30 and summary["prefix_cache_hits"] == 0
    assert summary["requests_running_max"] == 7 and summary["queue_time_s_mean"] == pytest.approx(4.0 / 30, abs=1e-5)
    assert MetricsWatch(problem="the server has no /metrics").summary() == {"problem": "the server has no /metrics"}


def test_the_model_is_found_by_its_id_or_its_folders_name():
    models = [{"id": "/models/Llama-3.1-8B-Instruct"}, {"id": "other"}]
    assert serving(models, "meta-llama/Llama-3.1-8B-Instruct")["id"] == "/models/Llama-3.1-8B-Instruct"
    assert serving([{"id": "Qwen/Qwen2.5-7B"}], "meta-llama/Llama-3.1-8B-Instruct") is None


# -- the client against test servers ---------------------------------------------------------------------------------
class Recorder:
    """A token stream that keeps every call, in order."""

    def __init__(self, expected: int) -> None:
        self.calls: list[tuple[int, list[int], bool]] = []
        self.expected = expected
        self.finished = 0
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()

    def chunk(self, request_id, tokens, final) -> None:
        with self._lock:
            self.calls.append((request_id, [int(t) for t in tokens], final))
            self.finished += final
            if self.finished == self.expected:
                self.done.set()

    def failed(self, error) -> None:
        self.error = error
        self.done.set()

    def outputs(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for request_id, tokens, _ in self.calls:
            out.setdefault(request_id, []).extend(tokens)
        return out


def prompts(count: int) -> list[Request]:
    return [Request(i, np.arange(i, i + 3 + i % 4, dtype=np.int64), GENERATION) for i in range(count)]


def run_client(urls, requests, settings: ClientSettings | None = None, encode=encode_test_text,
               probe=np.arange(1, 6)):
    client = ServingClient(parse_endpoints(urls), settings or ClientSettings(model="m", metrics_interval_s=0.2),
                           GENERATION, probe, encode=encode)
    stream = Recorder(len(requests))
    client.open(stream)
    try:
        client.submit(requests)
        assert stream.done.wait(WAIT_S), "the client neither finished nor failed"
    finally:
        client.close()
    return client, stream


def expected(request: Request) -> list[int]:
    return output_ids(request.prompt.tolist(), GENERATION.max_new_tokens)


def test_the_record_of_a_server_the_test_started_keeps_the_digest_of_the_folder_it_served():
    with StreamingServer(ServerSettings(model="m")) as a, StreamingServer(ServerSettings(model="m")) as b:
        endpoints = parse_endpoints([a.url, b.url])
        client = ServingClient(endpoints, ClientSettings(model="m", metrics_interval_s=0), GENERATION,
                               np.arange(1, 6), encode=encode_test_text, local=endpoints[:1],
                               model_folder_sha256="ab" * 32)
        records = client.records()
    assert records[0]["local"] and records[0]["extras"]["model_folder_sha256"] == "ab" * 32
    assert not records[1]["local"] and "model_folder_sha256" not in records[1]["extras"]   # a running server's


def test_requests_spread_over_endpoints_within_their_limit_and_every_output_is_the_servers():
    with StreamingServer(ServerSettings(model="m")) as a, StreamingServer(ServerSettings(model="m")) as b:
        requests = prompts(40)
        client, stream = run_client([a.url, b.url], requests,
                                    ClientSettings(model="m", in_flight=3, metrics_interval_s=0.2))
    assert stream.error is None
    assert stream.outputs() == {r.id: expected(r) for r in requests}
    records = client.records()
    assert [r["requests"] for r in records] == [a.requests - 1 - 4, b.requests - 1 - 4]   # less probe and warm-up
    assert all(r["requests"] > 0 and r["extras"]["most_in_flight"] <= 3 for r in records)
    assert all(r["extras"]["token_ids"] == SERVER_IDS and r["extras"]["serving_engine"] == "toolkit-test-server"
               for r in records)
    assert sum(r["extras"]["metrics"]["requests_succeeded"] for r in records) == 40   # warm-up polled before
    first_calls = {}
    for request_id, tokens, final in stream.calls:
        first_calls.setdefault(request_id, (tokens, final))
    assert all(len(tokens) >= 1 for tokens, _ in first_calls.values())   # the first chunk carries its first token


def test_a_one_chunk_answer_reports_its_tokens_in_one_final_call():
    with StreamingServer(ServerSettings(model="m", fault="one_chunk")) as server:
        requests = prompts(6)
        _, stream = run_client([server.url], requests)
    assert sorted(stream.calls) == sorted((r.id, expected(r), True) for r in requests)


def test_a_server_without_token_ids_is_read_through_the_tokenizer_and_the_record_says_so():
    with StreamingServer(ServerSettings(model="m", fault="no_token_ids", eos_every=2)) as server:
        requests = prompts(12)
        client, stream = run_client([server.url], requests)
    want = {r.id: output_ids(r.prompt.tolist(), 8, EOS, 2) for r in requests}
    assert stream.error is None and stream.outputs() == want and any(v == [EOS] for v in want.values())
    assert client.records()[0]["extras"]["token_ids"] == TEXT_IDS


def test_server_token_ids_can_be_required():
    with StreamingServer(ServerSettings(model="m", fault="no_token_ids")) as server:
        with pytest.raises(EndpointFailed, match="does not return the generated token ids"):
            run_client([server.url], prompts(2), ClientSettings(model="m", token_ids="server"))


def test_a_server_of_another_model_is_refused_before_the_test():
    with StreamingServer(ServerSettings(model="another")) as server:
        with pytest.raises(UserError, match=f"{server.url} serves another, not m"):
            run_client([server.url], prompts(2))


def test_a_server_that_refuses_connections_is_named():
    with StreamingServer(ServerSettings(model="m")) as server:
        url = server.url
    with pytest.raises(EndpointFailed, match=f"{url}/v1/models: cannot connect"):
        run_client([url], prompts(2))


def test_an_http_error_is_named_before_the_test():
    with StreamingServer(ServerSettings(model="m", fault="http_error")) as server:
        with pytest.raises(EndpointFailed, match=f"{server.url} answered HTTP 500"):
            run_client([server.url], prompts(2))


@pytest.mark.parametrize("fault, message", [
    ("break", "closed the connection in the middle of an answer"),
    ("malformed", "sent a stream chunk that is not a completion chunk"),
    ("stall", "sent nothing for 1 s"),
])
def test_a_fault_in_the_middle_of_the_run_fails_it_naming_the_endpoint(fault, message):
    """Probe and warm-up ask for 2 and 8 tokens: a fault after chunk 9 hits only the test's requests... of the
    faulty server; the good one keeps answering, and the run fails all the same."""
    settings = ClientSettings(model="m", request_timeout_s=1.0, metrics_interval_s=0, in_flight=2)
    long = GenerationSettings(max_new_tokens=16, eos_token_ids=(EOS,))
    requests = [Request(i, np.arange(i, i + 4, dtype=np.int64), long) for i in range(8)]
    with StreamingServer(ServerSettings(model="m")) as good, \
            StreamingServer(ServerSettings(model="m", fault=fault, fault_after=9)) as bad:
        _, stream = run_client([good.url, bad.url], requests, settings)
    assert isinstance(stream.error, EndpointFailed) and bad.url in str(stream.error) and message in str(stream.error)


def test_an_endpoint_that_dies_while_idle_fails_the_run():
    server = StreamingServer(ServerSettings(model="m", chunk_delay_s=0.2)).start()
    client = ServingClient(parse_endpoints([server.url]), ClientSettings(model="m", metrics_interval_s=0.1),
                           GENERATION, np.arange(1, 6))
    stream = Recorder(1)
    client.open(stream)
    try:
        server.stop()                 # nothing in flight: only the metrics poll can notice
        assert stream.done.wait(WAIT_S)
    finally:
        client.close()
    assert isinstance(stream.error, EndpointFailed) and "stopped answering during the run" in str(stream.error)


def test_the_system_description_names_the_serving_engines_that_answered():
    from types import SimpleNamespace

    from code.common.submission.system_json import framework

    def record(*engines):
        return SimpleNamespace(endpoints=[SimpleNamespace(extras={"serving_engine": name, "serving_engine_version": v})
                                          for name, v in engines])

    assert framework([record(("vllm", "0.32.0"), ("vllm", "0.32.0"))], "ONNX Runtime 1.31.1") == "vllm 0.32.0"
    assert framework([record(("vllm", "0.32.0")), record()], "ONNX Runtime 1.31.1") == \
        "ONNX Runtime 1.31.1, vllm 0.32.0"
    triton = SimpleNamespace(endpoints=[SimpleNamespace(extras={"engine": "/e.onnx"})])
    assert framework([triton], "ONNX Runtime 1.31.1") == "ONNX Runtime 1.31.1"


FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 4
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 192.168.7.0/24 2 0 2
           |-- 192.168.7.0
              /24 link UNICAST
           |-- 192.168.7.21
              /32 host LOCAL
        |-- 192.168.7.255
           /32 link BROADCAST
"""
IF_INET6 = ("fe80000000000000004265fffe68487e 05 40 20 80  docker0\n"
            "fd000000000000000000000000000002 04 40 00 82     eth0\n"
            "00000000000000000000000000000001 01 80 10 80       lo\n")


def test_the_interfaces_addresses_are_read_as_the_kernel_lists_them():
    from code.common.serving.machines import ipv4_local_addresses, ipv6_addresses

    assert ipv4_local_addresses(FIB_TRIE) == {"127.0.0.1", "192.168.7.21"}   # not the network nor its broadcast
    assert ipv6_addresses(IF_INET6) == {"fe80::42:65ff:fe68:487e", "fd00::2", "::1"}


@pytest.fixture
def lan_address(monkeypatch):
    """This machine with a LAN interface at 192.168.7.21 (and fd00::2) that no name of it resolves to."""
    from code.common.serving import machines

    monkeypatch.setattr(machines, "interface_addresses",
                        lambda: machines.ipv4_local_addresses(FIB_TRIE) | machines.ipv6_addresses(IF_INET6))
    monkeypatch.setattr(machines.socket, "gethostname", lambda: "no-such-host.invalid")
    monkeypatch.setattr(machines.socket, "getfqdn", lambda: "no-such-host.invalid")
    for cached in (machines.resolve, machines._own_addresses):
        cached.cache_clear()
    yield
    for cached in (machines.resolve, machines._own_addresses):
        cached.cache_clear()


@pytest.mark.parametrize("lan", ["http://192.168.7.21:8000", "http://[fd00::2]:8000"])
def test_the_nodes_lan_address_and_loopback_are_one_machine(lan_address, lan):
    """A server bound to all interfaces (make serve_llm), named by the node's LAN address and by 127.0.0.1: one
    server, refused when named twice, and one node in the record."""
    from code.common.serving.machines import THIS_MACHINE, count_machines, machine_key

    with pytest.raises(UserError, match="twice") as refused:
        parse_endpoints([lan, "http://127.0.0.1:8000"])
    assert refused.value.exit_code == 2
    host = parse_endpoint(lan).host
    assert machine_key(host) == THIS_MACHINE and count_machines([host, "127.0.0.1"]) == 1
    assert count_machines(["192.168.7.22", "127.0.0.1"]) == 2     # another machine of the LAN
