"""The bare client `make bench` measures the openai harness against: one asyncio loop in one process that sends the
same streamed `/v1/completions` requests as the harness's client, `concurrency` at a time, reads every chunk and
counts its tokens; no LoadGen, no scheduler, no system under test. What it reaches is what one Python process can
stream from the server, so the harness's figure over it is the harness's own cost."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Sequence


@dataclass
class BareResult:
    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0
    first_token_s: list[float] = field(default_factory=list)   # per request, from its send
    reads: int = 0              # reads of the answers (the socket transports' reads)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def bare_run(url: str, model: str, prompts: Sequence[Sequence[int]], max_tokens: int, concurrency: int,
             eos: Sequence[int] = (), rate: float = 0.0) -> BareResult:
    """Stream every prompt's completion from `url`, `concurrency` requests in flight; with `rate` (requests/s),
    each worker pauses between its requests for random gaps of mean 1/rate (a fixed seed), so that the server and
    the client sit idle between requests as they do under LoadGen's Server scenario at that rate: a request that
    finds both idle takes longer to its first token than one of a back-to-back loop (measured here: about 2.4 ms
    against 1.1 ms through the harness's client, on the toolkit's test server)."""
    return asyncio.run(_run(url, model, [list(map(int, p)) for p in prompts], max_tokens, concurrency, list(eos),
                            rate))


async def _run(url: str, model: str, prompts: list[list[int]], max_tokens: int, concurrency: int,
               eos: list[int], rate: float = 0.0) -> BareResult:
    import random

    import aiohttp

    result = BareResult()
    queue = list(reversed(prompts))
    from asyncio.selector_events import _SelectorSocketTransport as Transport

    read = Transport._read_ready__data_received

    def counted(transport):      # the loop's call for each read of a socket: reads counted, not assumed
        result.reads += 1
        return read(transport)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=None, sock_read=600)) as session:
        async def one(prompt: list[int]) -> None:
            body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "min_tokens": 1,
                               "temperature": 0.0, "top_p": 1.0, "n": 1, "stream": True, "stop_token_ids": eos,
                               "ignore_eos": False, "return_token_ids": True}, separators=(",", ":")).encode()
            sent = time.perf_counter()
            first = None
            async with session.post(url + "/v1/completions", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                response.raise_for_status()
                async for line in response.content:
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        break
                    for choice in json.loads(payload).get("choices") or ():
                        ids = choice.get("token_ids") or ()
                        if ids and first is None:
                            first = time.perf_counter() - sent
                        result.tokens += len(ids)
            result.requests += 1
            if first is not None:
                result.first_token_s.append(first)

        gaps = random.Random(0)

        async def worker() -> None:
            while queue:
                await one(queue.pop())
                if rate > 0 and queue:
                    await asyncio.sleep(gaps.expovariate(rate))

        start = time.perf_counter()
        Transport._read_ready__data_received = counted
        try:
            await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        finally:
            Transport._read_ready__data_received = read
        result.seconds = time.perf_counter() - start
    return result
