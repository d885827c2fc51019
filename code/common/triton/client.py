"""Triton endpoints as the harness sees them: `host:port` gRPC addresses, their health and what they serve.

Everything goes through the official client (tritonclient.grpc); it is imported when a call needs it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import EXIT_FAILURE, UserError
from ..serving.machines import refuse_aliases

DEFAULT_GRPC_PORT = 8001
_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")


def parse_endpoints(text: str) -> tuple[str, ...]:
    """`host1:8001,host2:8001` -> ("host1:8001", "host2:8001"); UserError on a malformed one, a name that does not
    resolve, or one server named twice (under one spelling or two)."""
    endpoints: list[str] = []
    servers: list[tuple[str, str, int]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = _HOST_PORT.match(part)
        if match is None or not 0 < int(match["port"]) < 65536:
            raise UserError(f"--endpoints: '{part}' is not host:port (for example "
                            f"node1:{DEFAULT_GRPC_PORT},node2:{DEFAULT_GRPC_PORT}: each server's gRPC port).")
        endpoints.append(part)
        servers.append((part, match["host"].removeprefix("[").removesuffix("]"), int(match["port"])))
    refuse_aliases(servers)
    if not endpoints:
        raise UserError("--endpoints is empty: give host:port of each running Triton server, "
                        f"for example node1:{DEFAULT_GRPC_PORT},node2:{DEFAULT_GRPC_PORT}.")
    return tuple(endpoints)


def connect(url: str):
    import tritonclient.grpc as grpcclient

    return grpcclient.InferenceServerClient(url=url, verbose=False)


def probe(url: str, models: list[str], timeout_s: float = 5.0) -> str | None:
    """None when the server at `url` is live and ready and serves every model in `models` ready; else what is
    wrong, in words."""
    from tritonclient.utils import InferenceServerException

    try:
        client = connect(url)
    except InferenceServerException as error:
        return f"cannot connect: {error.message()}"
    try:
        if not client.is_server_live(client_timeout=timeout_s):
            return "the server is not live"
        if not client.is_server_ready(client_timeout=timeout_s):
            return "the server is not ready"
        for model in models:
            if not client.is_model_ready(model, client_timeout=timeout_s):
                return f"model '{model}' is not ready"
    except InferenceServerException as error:
        return _reason(error)
    finally:
        client.close()
    return None


@dataclass(frozen=True)
class EndpointInfo:
    """What one endpoint serves, read from it before a run (recorded in metadata.json)."""

    url: str
    model: str
    engine: str
    engine_sha256: str
    max_batch_size: int
    server_version: str

    def as_dict(self) -> dict[str, object]:
        return {"url": self.url, "model": self.model, "engine": self.engine, "engine_sha256": self.engine_sha256,
                "max_batch_size": self.max_batch_size, "server_version": self.server_version}


def describe(url: str, model: str, timeout_s: float = 10.0) -> EndpointInfo:
    """Check `url` is up and serves `model`, and read what it serves; UserError naming the endpoint otherwise."""
    from tritonclient.utils import InferenceServerException

    problem = probe(url, [model], timeout_s)
    if problem is not None:
        raise UserError(f"Triton endpoint {url}: {problem}. Start a server there with `make serve_triton` "
                        f"(documentation/triton.md) and check the address.", exit_code=EXIT_FAILURE)
    client = connect(url)
    try:
        config = client.get_model_config(model, as_json=True, client_timeout=timeout_s)["config"]
        metadata = client.get_server_metadata(as_json=True, client_timeout=timeout_s)
    except InferenceServerException as error:
        raise UserError(f"Triton endpoint {url}: {_reason(error)}", exit_code=EXIT_FAILURE) from None
    finally:
        client.close()
    params = {key: value.get("string_value", "") for key, value in config.get("parameters", {}).items()}
    return EndpointInfo(url=url, model=model, engine=params.get("engine", ""),
                        engine_sha256=params.get("engine_sha256", ""),
                        max_batch_size=int(config.get("max_batch_size", 0)),
                        server_version=str(metadata.get("version", "")))


def _reason(error) -> str:
    status = error.status() or ""
    return f"{status}: {error.message()}" if status else str(error.message())
