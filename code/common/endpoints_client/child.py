"""The client as a child process: in a process group of its own (it starts worker processes), its output shown as
it comes and kept in a log, Ctrl-C or a stop signal handed to the whole group, a client that exits non-zero or is
killed reported in one sentence with the end of its log.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..errors import EXIT_FAILURE, UserError
from ..processes import stop_group

STOP_GRACE_S = 30.0       # the client writes its partial report on SIGINT before it exits
LOG_TAIL_LINES = 20


_RUNNING: set[subprocess.Popen] = set()    # the clients this process runs now (stop_clients ends them)


class ClientInterrupted(KeyboardInterrupt):
    """The run was stopped (Ctrl-C or a stop signal); the client's group has been ended."""


def client_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The toolkit's environment without what points Python at the toolkit's own (3.11) packages."""
    env = dict(os.environ if base is None else base)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _stop(process: subprocess.Popen, grace_s: float) -> None:
    """SIGINT to the group (the client's own Ctrl-C handling); then SIGKILL to whatever of the group is left after
    `grace_s`: the client's workers may outlive it, or ignore SIGINT (a process started in the background by a
    shell inherits SIGINT ignored), and they hold its output open."""
    stop_group(process, signal.SIGINT, grace_s=grace_s, linger_s=grace_s)


def stop_clients(grace_s: float = 5.0) -> None:
    """End every client this process runs (their own process groups: a stop of the test's process would leave them
    behind): SIGINT, SIGKILL after `grace_s`. For a harness's `interrupted`, from the stop signal's watcher."""
    for process in list(_RUNNING):
        _stop(process, grace_s)


def run_client(command: Sequence[str], args: Sequence[str], log_path: Path, *, cwd: Path | None = None,
               env: Mapping[str, str] | None = None, show: Callable[[str], None] = print,
               what: str = "The MLCommons endpoints client", grace_s: float = STOP_GRACE_S) -> None:
    """Run `command + args`; every line of its output is shown (`show`) and written to `log_path`. UserError (exit
    status 1) when it exits non-zero or a signal ends it; ClientInterrupted when the run is stopped here."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    full = [*command, *args]
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(full)}\n")
        log.flush()
        process = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                   cwd=cwd, env=client_environment(env), start_new_session=True,
                                   errors="replace")
        _RUNNING.add(process)
        try:
            for line in process.stdout:
                log.write(line)
                log.flush()
                tail.append(line.rstrip("\n"))
                show(line.rstrip("\n"))
            process.wait()
        except BaseException:
            _stop(process, grace_s)
            log.write("[stopped by the toolkit: the run was interrupted]\n")
            raise ClientInterrupted(f"{what} was stopped; its log: {log_path}") from None
        finally:
            _RUNNING.discard(process)
            if process.stdout is not None:
                process.stdout.close()
    if process.returncode == 0:
        return
    ended = (f"was killed by {signal.Signals(-process.returncode).name}" if process.returncode < 0
             else f"exited with status {process.returncode}")
    ending = "\n".join(tail)
    raise UserError(f"{what} {ended}; nothing is staged from this run. The end of its log ({log_path}):\n{ending}",
                    exit_code=EXIT_FAILURE)


def validate(command: Sequence[str], config: Path, log_path: Path, env: Mapping[str, str] | None = None) -> None:
    """`inference-endpoint validate-yaml --config <config>`: the client's own schema check of the rendered YAML
    before anything is started."""
    run_client(command, ["validate-yaml", "--config", str(config)], log_path, env=env, show=lambda _: None,
               what=f"The client's check of the YAML the toolkit wrote ({config})")
