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

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def bare_run(url: str, model: str, prompts: Sequence[Sequence[int]], max_tokens: int, concurrency: int,
             eos: Sequence[int] = ()) -> BareResult:
    """Stream every prompt's completion from `url`, `concurrency` requests in flight."""
    return asyncio.run(_run(url, model, [list(map(int, p)) for p in prompts], max_tokens, concurrency, list(eos)))


async def _run(url: str, model: str, prompts: list[list[int]], max_tokens: int, concurrency: int,
               eos: list[int]) -> BareResult:
    import aiohttp

    result = BareResult()
    queue = list(reversed(prompts))
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

        async def worker() -> None:
            while queue:
                await one(queue.pop())

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        result.seconds = time.perf_counter() - start
    return result
