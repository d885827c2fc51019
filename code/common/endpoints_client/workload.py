"""What a benchmark served by the endpoints client gives the endpoints harness for one test: its data set blocks as
the round's reference example writes them, the model's generation settings, and the gates the round holds the
client's report to. The harness adds the served model, the endpoints, the seeds and the durations (config_yaml.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class AccuracySubset:
    """The part of the round's accuracy set a short accuracy pass scores (a test run, or fewer samples asked): how
    many samples of each part of each group (BFCL v4: category -> subset -> count), chosen deterministically by the
    client from the data set block's own parameters. Its figures are the subset's, never the whole set's."""

    of_samples: int                                   # the round's accuracy set (BFCL v4: 995)
    counts: Mapping[str, Mapping[str, int]]           # group -> part -> samples
    how: str                                          # how the client is asked for it, one clause
    group_scores: str = ""                            # the report's breakdown keys of the scores by group, by part
    part_scores: str = ""

    @property
    def samples(self) -> int:
        return sum(sum(parts.values()) for parts in self.counts.values())

    def line(self) -> str:
        groups = "; ".join(f"{group} {sum(parts.values())} ({', '.join(f'{p} {n}' for p, n in parts.items())})"
                           for group, parts in self.counts.items())
        return (f"a subset of the accuracy set, not its {self.of_samples}-sample score: {self.samples} samples, "
                f"{how_many(self.counts)} ({self.how}): {groups}")

    def as_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "of_samples": self.of_samples, "how": self.how,
                "counts": {group: dict(parts) for group, parts in self.counts.items()}}


def how_many(counts: Mapping[str, Mapping[str, int]]) -> str:
    parts = sum(len(p) for p in counts.values())
    return f"{len(counts)} group{'s' if len(counts) != 1 else ''}, {parts} part{'s' if parts != 1 else ''}"


@dataclass(frozen=True)
class ClientWorkload:
    datasets: tuple[Mapping[str, Any], ...]           # the YAML's data set blocks
    model_params: Mapping[str, Any] = field(default_factory=dict)   # temperature, seed, max_new_tokens, ...
    tokenizer: str | None = None                      # the client's tokenizer_name (None: the client counts none)
    load_pattern: Mapping[str, Any] = field(default_factory=lambda: {"type": "agentic_inference",
                                                                     "target_concurrency": 1})
    targets: Mapping[str, float] = field(default_factory=dict)      # accuracy figure -> threshold (accuracy tests)
    samples_required: int | None = None               # accuracy samples the round scores (None: not gated)
    timeout_s: int | None = None                      # the client's whole-run timeout
    test_type: str = "online"                         # the YAML's type: online, offline
    api_type: str = "openai"                          # the client's adapter: openai, videogen, ...
    n_samples_to_issue: int | None = None             # the performance phase's queries (None: the client's own count)
    num_workers: int = 1                              # the client's worker processes
    max_connections: int = 1                          # its connections to the endpoints, at most
    settings: Mapping[str, Any] = field(default_factory=dict)       # further settings blocks (warmup, drain)
    notes: tuple[str, ...] = ()                       # what the YAML's header says of it (substitutes, subsets)
    accuracy_subset: AccuracySubset | None = None     # a short accuracy pass's part of the set (None: all of it)
    audit: Mapping[str, Any] | None = None            # the YAML's audit block: the client's compliance audit after
                                                      # the performance phase (wan: TEST04, output_caching_test)


@dataclass(frozen=True)
class ClientLoad:
    """What the client will issue in one test, known before it runs (the plan's estimate of a client test): its
    queries and what they are (the plan takes them one after another at the time per query, or per sample where the
    pace is a rate)."""

    queries: int                  # turns of the replay, or accuracy samples
    what: str                     # e.g. "1 conversation, 2 assistant turns of the agentic replay"
    at_most: bool = False         # the count is a bound (a cut made when the test starts may keep fewer)
    one_pass: str = ""            # why min_duration_ms does not lengthen it (the client issues each query once)
