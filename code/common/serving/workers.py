"""Worker processes of the serving client (`openai_workers`): one asyncio event loop in one process reads about
one core's worth of streamed tokens, so a LoadGen host that streams from many servers spreads its HTTP clients over
N processes, each with its own event loop, connections and parser; LoadGen stays in the process that started them.

The client in the LoadGen process (client.py) keeps everything but the requests: it checks, probes and warms up
the endpoints and polls their metrics as with one loop, the scheduler hands each request to an endpoint as always
(limits and policies per endpoint), and the request goes to the worker with the fewest in flight. A worker streams
it with the same transport as the one-loop client (transport.Transport; the worker's side is
worker_process.py) and reports its first chunk and its final one over its channel (channel.py): the LoadGen
process calls FirstTokenComplete and QuerySamplesComplete as it reads them, on its client's event loop.

Faults: a worker reports what fails in it (an endpoint named, as with one loop) and the run fails; a worker that
ends (killed, crashed) closes its channel, which fails the run naming the worker and how it ended. Each worker is
started as every process of the toolkit is (processes.start_in_group: a group of its own, SIGTERM when the thread
that started it, the client's event loop, ends), ends when its channel closes (the LoadGen process gone, however
it ended), and the client's shutdown (or `stop_workers`) ends them with SIGTERM, then SIGKILL (processes.stop_group), leaving none.

Where the machine has a core for each worker and two more, the workers are pinned to the cores after the first
two (os.sched_setaffinity), which are left to LoadGen's threads and the client's loop.
"""
from __future__ import annotations

import asyncio
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable

import msgspec

from .channel import Channel

READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
RESERVED_CORES = 2        # for LoadGen's threads and the client's event loop, where workers are pinned
CHANNEL = "unix socket pair, msgpack frames"
# Frames from a worker: [READY], [CHUNKS, [[request id, tokens, final(, the answer's text)], ...], its reads of
# answers so far], [FAILED, message].
READY, CHUNKS, FAILED = 0, 1, 2
# Frames to a worker (pickled): (SETUP, {...}), (REQUESTS, [(endpoint number, request), ...] as pack_requests
# writes them), (CANCEL, [ids]), (QUIT,).
SETUP, REQUESTS, CANCEL, QUIT = 0, 1, 2, 3


class WorkerFailed(RuntimeError):
    """A worker process ended in the middle of the run; the message names it and how it ended."""


def default_workers(endpoints: int, cores: int | None = None) -> int:
    """Workers for `openai_workers=0`: one per core beyond the two left to LoadGen, at most four per endpoint
    (one loop streams from several servers' worth of requests), at least one (one loop, in the LoadGen process)."""
    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    return max(1, min(cores - RESERVED_CORES, 4 * endpoints))


def worker_cores(count: int) -> list[int]:
    """The cores the workers are pinned to: all but the first two where there are `count` + 2; else none (not
    pinned)."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[RESERVED_CORES:] if len(cores) >= count + RESERVED_CORES else []


class Worker:
    """The LoadGen process's handle of one worker: its process, its channel, its requests in flight."""

    def __init__(self, number: int, process: subprocess.Popen, channel: Channel) -> None:
        self.number, self.process, self.channel = number, process, channel
        self.in_flight = 0
        self.settings: dict[Any, int] = {}      # the requests' settings it has had (frozen, equal ones one): numbers
        self.reads = 0            # its reads of answers, as its last frame said (make bench's tokens per read)
        self.ready = asyncio.get_running_loop().create_future()

    @property
    def name(self) -> str:
        return f"openai client worker {self.number} (pid {self.process.pid})"

    def how_it_ended(self) -> str:
        try:
            status = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "its channel closed, the process still runs"
        if status < 0:
            return f"killed by {signal.Signals(-status).name}"
        return f"exit status {status}"


async def start_workers(count: int, setup: dict[str, Any], on_frame: Callable[[Worker, Any], None],
                        on_closed: Callable[[Worker], None]) -> list[Worker]:
    """`count` workers, each set up with `setup` (the endpoints as checked, the settings) and ready (its
    sessions open); on the calling event loop, whose thread they die with. WorkerFailed when one does not start."""
    from ..paths import REPO_ROOT
    from ..processes import start_in_group

    loop = asyncio.get_running_loop()
    decoder = msgspec.msgpack.Decoder()
    workers: list[Worker] = []
    cores = worker_cores(count)
    try:
        for number in range(count):
            mine, theirs = socket.socketpair()
            try:
                process = start_in_group([sys.executable, "-m", "code.common.serving.worker_process",
                                          str(theirs.fileno())], pass_fds=(theirs.fileno(),), cwd=REPO_ROOT)
            finally:
                theirs.close()
            holder: list[Worker] = []       # the worker, once made: its channel's callbacks name it
            channel = Channel(mine, loop, lambda data, of=holder: on_frame(of[0], decoder.decode(data)),
                              lambda of=holder: on_closed(of[0]))
            worker = Worker(number, process, channel)
            holder.append(worker)
            workers.append(worker)
            if cores:
                try:
                    os.sched_setaffinity(process.pid, cores)
                except OSError:
                    pass          # not allowed here (a container's limits): the kernel places them
            worker.channel.send(pickle.dumps((SETUP, setup), protocol=pickle.HIGHEST_PROTOCOL))
        await asyncio.wait([w.ready for w in workers], timeout=READY_TIMEOUT_S)
        for worker in workers:
            if not worker.ready.done():
                raise WorkerFailed(f"{worker.name} did not start within {READY_TIMEOUT_S:g} s")
            worker.ready.result()
    except BaseException:
        stop_workers(workers)
        raise
    return workers


def send_requests(worker: Worker, items: list) -> None:
    worker.channel.send(pickle.dumps((REQUESTS, *pack_requests(worker.settings, items)),
                                     protocol=pickle.HIGHEST_PROTOCOL))


def pack_requests(sent: dict[Any, int], items: list) -> tuple[list, list]:
    """[(endpoint number, request), ...] as a worker's REQUESTS frame carries them: each request's settings by
    number, the settings that worker has not had yet beside them (`sent`, the worker's, remembers them: equal
    settings are one), and a prompt of token ids as its bytes and dtype. Pickled whole, a request with its id
    array and its settings dataclass cost about 30 us to write and 30 to read (a quarter of a microsecond per
    token at 128 tokens, in each process); so, about 5 and 12."""
    import numpy as np

    new, packed = [], []
    for number, request in items:
        known = sent.get(request.settings)
        if known is None:
            known = sent[request.settings] = len(sent)
            new.append(request.settings)
        prompt, dtype = request.prompt, None
        if isinstance(prompt, np.ndarray) and prompt.ndim == 1:     # token ids (a chat travels as it is)
            prompt, dtype = prompt.tobytes(), prompt.dtype.str
        packed.append((number, request.id, dtype, prompt, known))
    return packed, new


def unpack_requests(settings: list, packed: list, new: list) -> list:
    """pack_requests' frame back to [(endpoint number, request), ...]; `settings` (the worker's) grows by `new`."""
    import numpy as np

    from ..generation import Request

    settings.extend(new)
    return [(number, Request(request_id, prompt if dtype is None else np.frombuffer(prompt, dtype=dtype),
                             settings[index]))
            for number, request_id, dtype, prompt, index in packed]


def cancel_requests(worker: Worker, request_ids: list[int]) -> None:
    worker.channel.send(pickle.dumps((CANCEL, request_ids)))


def stop_workers(workers: list[Worker]) -> None:
    """On the loop: ask every worker to quit, wait for them, then SIGTERM and SIGKILL to what is left; returns with
    every one reaped. (The client's shutdown does the same in two halves, the waiting off its loop.)"""
    quit_workers(workers)
    reap_workers(workers)
    close_channels(workers)


def quit_workers(workers: list[Worker]) -> None:
    for worker in workers:
        worker.channel.send(pickle.dumps((QUIT,)))


def reap_workers(workers: list[Worker]) -> None:
    """Wait up to STOP_GRACE_S for the workers to end, then end what is left (any thread)."""
    from ..processes import stop_group

    deadline = time.monotonic() + STOP_GRACE_S
    for worker in workers:
        try:
            worker.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        stop_group(worker.process, signal.SIGTERM, grace_s=STOP_GRACE_S)


def close_channels(workers: list[Worker]) -> None:
    for worker in workers:
        worker.channel.close()
