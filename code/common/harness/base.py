"""What every system under test shares, whatever reaches its engine: counters, the run's error, empty completions,
progress and LoadGen's construct/destroy of the SUT and QSL. A harness writes only how issued samples reach its
engine (`issue`, and `start`/`stop` for its threads) and completes them with `complete` or `complete_empty`.

Failure never hangs and never passes for a result: the first error is kept (`fail`), every outstanding sample is
completed empty so that LoadGen ends, and the child process records the run as failed with that error. A sample of
a token-streaming harness completed empty gets an empty first token first where none was reported, so that
LoadGen's per-token bookkeeping has an entry for every completed sample.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..benchmark_api import Responses
from ..constants import Scenario


@dataclass
class Counters:
    """Progress of a run; each field is updated under the SUT's lock and can be read from any thread."""

    issued: int = 0        # samples LoadGen issued
    completed: int = 0     # samples completed to LoadGen (empty ones included)
    inferred: int = 0      # samples through the engine: moves batch by batch, within a work item too
    tokens: int = 0        # output tokens generated, first tokens included (token-streaming harnesses)

    @property
    def progress(self) -> int:
        """Samples done, for the progress display."""
        return max(self.inferred, self.completed)


def complete_responses(lg, ids: np.ndarray, responses: Responses) -> None:
    """Complete `ids` to LoadGen with their responses, in one call. Per-sample response objects are a harness's
    main cost: their addresses and sizes come from one numpy step over the buffer's offsets."""
    offsets = responses.offsets
    base = responses.data.__array_interface__["data"][0]   # contiguous: Responses checks it
    addresses, sizes = (offsets[:-1] + base).tolist(), np.diff(offsets).tolist()
    response = lg.QuerySampleResponse
    lg.QuerySamplesComplete([response(i, a, n) for i, a, n in zip(ids.tolist(), addresses, sizes, strict=True)])


class SUTBase:
    """Base of every system under test. Subclasses implement `issue` and, where they run threads, `start`/`stop`."""

    def __init__(self, scenario: Scenario) -> None:
        import mlperf_loadgen as lg

        self._lg = lg
        self.scenario = scenario
        self.counters = Counters()
        self._error: BaseException | None = None
        self._lock = threading.Lock()     # counters and error
        self._releases: list[Callable[[], None]] = []    # what `close` frees (e.g. the backend instances)

    # -- the run's error ---------------------------------------------------------------------------
    @property
    def error(self) -> BaseException | None:
        """What failed the run (the first failure), or None."""
        return self._error or self.engine_error()

    def engine_error(self) -> BaseException | None:
        """A failure the engine keeps by itself (e.g. in C++), where it has one."""
        return None

    def fail(self, error: BaseException) -> None:
        """Keep `error` as the run's failure unless one is kept already."""
        with self._lock:
            if self._error is None:
                self._error = error

    # -- completions -------------------------------------------------------------------------------
    def count_issued(self, count: int) -> None:
        with self._lock:
            self.counters.issued += count

    def complete(self, ids: np.ndarray, responses: Responses) -> None:
        """Complete `ids` with `responses` (one LoadGen call) and count them done."""
        complete_responses(self._lg, ids, responses)
        with self._lock:
            self.counters.completed += len(ids)

    def complete_empty(self, ids: Sequence[int] | np.ndarray, *, first_token_missing: bool = False) -> None:
        """Complete `ids` with empty responses (the outstanding samples of a failed run) and count them done;
        `first_token_missing`: report an empty first token before (a token stream whose first never came)."""
        ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        if not ids:
            return
        lg = self._lg
        if first_token_missing:
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample_id, 0, 0) for sample_id in ids])
        lg.QuerySamplesComplete([lg.QuerySampleResponse(sample_id, 0, 0) for sample_id in ids])
        with self._lock:
            self.counters.completed += len(ids)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "SUTBase":
        return self

    def stop(self) -> None:
        pass

    def on_close(self, release: Callable[[], None]) -> None:
        """Have `close` call `release` (e.g. free the backend instances the SUT runs on)."""
        self._releases.append(release)

    def close(self) -> None:
        """Free what the SUT was given to free, the last first, each once, even when one fails; the first failure
        is raised after. The test's process calls it on every way out, after `stop`."""
        releases, self._releases = self._releases, []
        failure: BaseException | None = None
        for release in reversed(releases):
            try:
                release()
            except BaseException as error:  # noqa: BLE001  raised below, after the others ran
                failure = failure or error
        if failure is not None:
            raise failure

    def issue(self, ids: list[int], indices: list[int]) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        pass

    def construct(self) -> Any:
        """LoadGen's handle of this SUT."""
        return self._lg.ConstructFastSUT(self.issue, self.flush)

    def destroy(self, handle: Any) -> None:
        self._lg.DestroySUT(handle)

    def endpoint_records(self) -> list[dict[str, Any]]:
        """The servers the inference ran on (host, port, protocol, what each served), for the run's record; none for
        a harness that runs its engine in this process."""
        return []


class QSLBase:
    """Base of the sample libraries LoadGen loads and unloads through `load` / `unload`."""

    total: int
    performance_count: int

    def load(self, indices: Sequence[int]) -> None:
        raise NotImplementedError

    def unload(self, indices: Sequence[int]) -> None:
        raise NotImplementedError

    def construct(self) -> Any:
        import mlperf_loadgen as lg

        return lg.ConstructQSL(self.total, self.performance_count, self.load, self.unload)

    def destroy(self, handle: Any) -> None:
        import mlperf_loadgen as lg

        lg.DestroyQSL(handle)
