"""`--endpoints` of the openai harness: the base URLs of OpenAI-compatible servers, one or more per node."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import UserError
from .machines import refuse_aliases

DEFAULT_SCHEME = "http"


@dataclass(frozen=True)
class Endpoint:
    """One server: `url` is its base (scheme://host:port), requests go to `url + /v1/...`."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.url


def parse_endpoint(text: str, flag: str = "--endpoints") -> Endpoint:
    """`http://host:port`, `host:port` (http), with or without a trailing `/v1`; UserError naming the flag else."""
    raw = text.strip()
    if not raw:
        raise UserError(f"{flag} has an empty entry; give each server as http://host:port, separated by commas.")
    split = urlsplit(raw if "://" in raw else f"{DEFAULT_SCHEME}://{raw}")
    path = split.path.rstrip("/")
    try:
        port = split.port
    except ValueError:
        port = None
    if split.scheme not in ("http", "https") or not split.hostname or port is None or path not in ("", "/v1") \
            or split.query or split.fragment:
        raise UserError(f"{flag}: '{raw}' is not the address of an OpenAI-compatible server; give it as "
                        f"http://host:port (for example http://node1:8000), the port the server listens on.")
    return Endpoint(split.scheme, split.hostname, port)


def parse_endpoints(items: tuple[str, ...] | list[str], flag: str = "--endpoints") -> tuple[Endpoint, ...]:
    """Each entry parsed and its host resolved; a server named twice, under one spelling or two (localhost and
    127.0.0.1), is refused: it would get twice its share."""
    endpoints = tuple(parse_endpoint(item, flag) for item in items)
    refuse_aliases([(endpoint.url, endpoint.host, endpoint.port) for endpoint in endpoints], flag)
    if not endpoints:
        raise UserError(f"{flag} is empty: give the base URL of each running server, e.g. "
                        f"{flag}=http://node1:8000,http://node2:8000.")
    return endpoints
