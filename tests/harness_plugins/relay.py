"""The relay harness, of a harness type of its own (`--harness_type=relay`): each issued query goes, sample by
sample, to one worker thread that calls the test's backend instances (the toolkit's, as the in-process harness
makes them) and completes it; `--relay_pause_us` (its own flag, which it parses and checks) waits that long before
each call, as a remote engine's round trip would."""
from __future__ import annotations

import queue
import threading
import time

import numpy as np

from code.common.errors import UserError
from code.common.harness.base import SUTBase
from code.common.harness.registry import HARNESSES, HarnessFlag, HarnessPlugin, HarnessRun

NAME = "relay"
PAUSE_FLAG = "relay_pause_us"
MAX_PAUSE_US = 100_000
CONTRACT_FLAGS = (f"--{PAUSE_FLAG}=50",)


class RelaySUT(SUTBase):
    def __init__(self, run: HarnessRun, qsl, call, pause_us: int) -> None:
        super().__init__(run.spec.scenario_enum)
        self.qsl, self.call, self.pause_s = qsl, call, pause_us / 1e6
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._relay, daemon=True)

    def start(self) -> "RelaySUT":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._work.put(None)
        self._thread.join(timeout=30)

    def issue(self, ids: list[int], indices: list[int]) -> None:
        self.count_issued(len(ids))
        for sample_id, index in zip(ids, indices):
            self._work.put((sample_id, index))

    def _relay(self) -> None:
        while (item := self._work.get()) is not None:
            sample_id, index = item
            ids = np.asarray([sample_id], np.uint64)
            try:
                time.sleep(self.pause_s)
                self.complete(ids, self.call(self.qsl.gather([index]), [index]))
            except BaseException as error:  # noqa: BLE001  the run's failure, recorded by the child
                self.fail(error)
                self.complete_empty(ids)


class RelayHarness(HarnessPlugin):
    name = NAME
    harness_type = NAME
    description = "tests only: one worker thread relays each sample to the backend instances"
    flags = (HarnessFlag(PAUSE_FLAG, f"relay harness (tests only): microseconds to wait before each call, 0 to "
                                     f"{MAX_PAUSE_US}"),)

    def parse_flag(self, name: str, text: str) -> int:
        if not text.isdigit() or int(text) > MAX_PAUSE_US:
            raise UserError(f"--{name}={text}: expected a whole number of microseconds from 0 to {MAX_PAUSE_US}.")
        return int(text)

    def run_options(self, args, paths) -> dict:
        return {"pause_us": args.harness_flags.get(PAUSE_FLAG, 0)}

    def create(self, run: HarnessRun):
        from code.common.engines.input_samples import engine_inputs
        from code.common.harness.plugins.inprocess import backend_instances
        from code.common.harness.qsl import SampleLibrary

        qsl = SampleLibrary(run.samples, run.spec.performance_sample_count,
                            engine_inputs(run.benchmark, {**run.fields, "model": run.spec.model}))
        instances = backend_instances(run)
        sut = RelaySUT(run, qsl, instances.calls[0], int(run.spec.harness_options["pause_us"]))
        sut.on_close(instances.close)
        return sut.start(), qsl


def register() -> tuple[str, ...]:
    if NAME not in HARNESSES:
        HARNESSES.register(NAME, RelayHarness)
    return (NAME,)
