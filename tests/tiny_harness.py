"""A harness that lives only in tests/: it plugs in by registration alone (no core file names it) and runs through
the normal child process path: `python -m tests.tiny_harness <run_spec.json>` registers it, then runs
code.common.harness.child as the toolkit does.

Its engine is the sample library itself: each sample is answered with the record the benchmark's response format
makes of the sample's first value, without a backend, on a thread of its own (as a remote engine's client would
answer). It declares one field of its own, which the field catalogue gathers through the registry.
"""
from __future__ import annotations

import queue
import sys
import threading

import numpy as np

from code.common.benchmark_api import Responses
from code.common.fields import Field
from code.common.harness.registry import HARNESSES, HarnessPlugin, HarnessRun
from code.common.harness.qsl import SampleLibrary
from code.common.harness.base import SUTBase

NAME = "tiny-echo"


class EchoSUT(SUTBase):
    """Completes each issued sample with the benchmark's response of its first value, from one worker thread."""

    def __init__(self, run: HarnessRun, qsl: SampleLibrary) -> None:
        super().__init__(run.spec.scenario_enum)
        self.qsl = qsl
        self.response = run.benchmark.response
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._answer, daemon=True)

    def start(self) -> "EchoSUT":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._work.put(None)
        self._thread.join(timeout=10)

    def issue(self, ids: list[int], indices: list[int]) -> None:
        self.count_issued(len(ids))
        self._work.put((np.asarray(ids, np.uint64), np.asarray(indices, np.int64)))

    def _answer(self) -> None:
        while (item := self._work.get()) is not None:
            ids, indices = item
            try:
                [batch] = self.qsl.gather(indices).values()        # the benchmark's one input
                first = batch.reshape(len(indices), -1)[:, 0]
                records = np.repeat(first[:, None], len(self.response.fields), axis=1).astype(self.response.np_dtype)
                self.complete(ids, Responses.rows(records))
            except BaseException as error:  # noqa: BLE001  the run's failure, recorded by the child
                self.fail(error)
                self.complete_empty(ids)


class EchoHarness(HarnessPlugin):
    name = NAME
    harness_type = "custom"
    needs_engine = False
    fields = (Field("echo_note", str, "", "tiny-echo harness (tests only): a note it ignores."),)

    def create(self, run: HarnessRun):
        qsl = SampleLibrary(run.samples, run.spec.performance_sample_count, run.benchmark.models[run.spec.model].inputs)
        return EchoSUT(run, qsl).start(), qsl


def register() -> None:
    if NAME not in HARNESSES:
        HARNESSES.register(NAME, EchoHarness)


register()

if __name__ == "__main__":
    from code.common.harness.child import main

    sys.exit(main(sys.argv[1:]))
