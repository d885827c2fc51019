"""Which endpoint the openai harness sends the next request to (`openai_scheduler`).

Every endpoint takes at most `in_flight` requests at a time (`openai_in_flight`); a request that finds every
endpoint full waits in the client's queue and goes out when one frees a slot, to the endpoint the policy picks among
those with room:
- `round_robin`: the next endpoint in turn;
- `fewest_requests`: the one with the fewest requests in flight (round robin among equals);
- `fewest_input_tokens`: the one with the fewest prompt tokens in flight (round robin among equals), which evens
  out prefill work when prompt lengths vary widely (a chat prompt, which the server tokenizes, counts by its size:
  prompts.size).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

POLICIES = ("round_robin", "fewest_requests", "fewest_input_tokens")


@dataclass
class Load:
    """What one endpoint has in flight."""

    requests: int = 0
    input_tokens: int = 0


class Scheduler:
    def __init__(self, policy: str, endpoints: int, in_flight: int) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown scheduling policy {policy!r}; the policies are {', '.join(POLICIES)}")
        if endpoints < 1 or in_flight < 1:
            raise ValueError(f"need at least one endpoint and one request in flight (got {endpoints}, {in_flight})")
        self.policy = policy
        self.in_flight = in_flight
        self.loads = [Load() for _ in range(endpoints)]
        self._next = 0

    def has_room(self) -> bool:
        return any(load.requests < self.in_flight for load in self.loads)

    def pick(self, input_tokens: int) -> int | None:
        """The endpoint the next request goes to (its load counted), or None when every one is full."""
        count = len(self.loads)
        order = [(self._next + k) % count for k in range(count)]
        open_ = [i for i in order if self.loads[i].requests < self.in_flight]
        if not open_:
            return None
        if self.policy == "fewest_requests":
            chosen = min(open_, key=lambda i: self.loads[i].requests)
        elif self.policy == "fewest_input_tokens":
            chosen = min(open_, key=lambda i: self.loads[i].input_tokens)
        else:
            chosen = open_[0]
        self._next = (chosen + 1) % count
        load = self.loads[chosen]
        load.requests += 1
        load.input_tokens += input_tokens
        return chosen

    def done(self, endpoint: int, input_tokens: int) -> None:
        load = self.loads[endpoint]
        load.requests -= 1
        load.input_tokens -= input_tokens

    def requests_in_flight(self) -> Sequence[int]:
        return [load.requests for load in self.loads]
