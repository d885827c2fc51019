"""The one lifecycle of the processes the toolkit starts (code/common/processes.py), on small real processes: a
stop is forwarded to the group and escalated to SIGKILL, a parent that dies takes its child along, a free port is
free, a failure shows the end of the log."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from code.common import processes
from code.common.processes import (NO_LOG, PARENT_GONE_STATUS, ProcessSet, ServerProcess, free_port, group_members,
                                   log_tail, start_in_group, stop_group)

PATIENCE_S = 60   # an upper bound for a loaded machine, never a timing expectation


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def wait_for(check, what: str):
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} after {PATIENCE_S} s")


def gone(pid: int) -> bool:
    """The process has ended (no entry, or a zombie nobody reaped yet)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.fixture
def started():
    """Processes a test starts, killed (group and all) if the test leaves them."""
    found: list[subprocess.Popen] = []
    yield found
    for process in found:
        if process.poll() is None or group_members(process.pid):
            processes.signal_group(process, signal.SIGKILL)
            process.wait()


STUBBORN = """
    import signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(600)
"""


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path, started):
    log = tmp_path / "stubborn.log"
    process = start_in_group(python(STUBBORN), log_path=log, header="$ stubborn\n")
    started.append(process)
    wait_for(lambda: "ready" in log.read_text(), "the child never said it was ready")
    assert os.getpgid(process.pid) == process.pid          # it leads a group of its own
    stop_group(process, signal.SIGTERM, grace_s=0.5)
    assert process.returncode == -signal.SIGKILL
    assert group_members(process.pid) == []
    assert log.read_text().startswith("$ stubborn\nready")


def test_a_forwarded_stop_signal_reaches_the_whole_group(tmp_path, started):
    marker = tmp_path / "helper-stopped"
    helper = tmp_path / "helper.py"
    helper.write_text(textwrap.dedent(f"""
        import signal, sys, time
        def stopped(*_):
            open({str(marker)!r}, "w").write("SIGINT")
            sys.exit(0)
        signal.signal(signal.SIGINT, stopped)
        print("helper ready", flush=True)
        time.sleep(600)
    """))
    leader = python(f"""
        import signal, subprocess, sys, time
        helper = subprocess.Popen([sys.executable, {str(helper)!r}])
        signal.signal(signal.SIGINT, lambda *_: sys.exit(7 if helper.wait() == 0 else 8))
        time.sleep(600)
    """)
    log = tmp_path / "leader.log"
    process = start_in_group(leader, log_path=log)
    started.append(process)
    wait_for(lambda: "helper ready" in log.read_text(), "the helper never started")
    stop_group(process, signal.SIGINT, grace_s=PATIENCE_S)
    assert process.returncode == 7, log.read_text()       # the leader saw its helper end on the same SIGINT
    assert marker.read_text() == "SIGINT"
    assert group_members(process.pid) == []


def test_a_server_dies_with_the_process_that_started_it(tmp_path, started):
    pid_file = tmp_path / "server.pid"
    parent = python(f"""
        import sys, time
        from pathlib import Path
        from code.common.processes import start_in_group
        server = start_in_group([sys.executable, "-c", "import time; time.sleep(600)"],
                                log_path=Path({str(tmp_path / 'server.log')!r}))
        Path({str(pid_file)!r}).write_text(str(server.pid))
        time.sleep(600)
    """)
    process = subprocess.Popen(parent, cwd=Path(__file__).resolve().parents[1])
    started.append(process)
    server = int(wait_for(lambda: pid_file.is_file() and pid_file.read_text(), "the server never started"))
    assert not gone(server)
    process.kill()                 # no chance to stop anything: the kernel's death signal does it
    process.wait()
    wait_for(lambda: gone(server), f"the server (pid {server}) outlived the process that started it")


def test_a_harness_child_whose_parent_goes_away_records_the_stop_and_exits_129(tmp_path):
    child_end, parent_end = processes.watch_pipe()
    child = python(f"""
        import time
        from code.common.processes import ChildGuard
        ChildGuard(lambda reason: print(reason, flush=True), {child_end}).start()
        print("guarded", flush=True)
        time.sleep(600)
    """)
    process = subprocess.Popen(child, cwd=Path(__file__).resolve().parents[1], pass_fds=(child_end,),
                               stdout=subprocess.PIPE, text=True)
    os.close(child_end)
    try:
        assert process.stdout.readline().strip() == "guarded"
    finally:
        os.close(parent_end)       # what a parent that ends, however it ends, leaves behind
    out, _ = process.communicate(timeout=PATIENCE_S)
    assert process.returncode == PARENT_GONE_STATUS == 128 + signal.SIGHUP
    assert "went away before the test ended" in out


def test_a_free_port_is_free():
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))     # nobody holds it: binding it works
        listener.listen()
    assert 0 < port < 65536


def test_the_log_tail_is_the_last_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    assert log_tail(log, 5) == "\n".join(f"line {i}" for i in range(45, 50))
    assert log_tail(log, 500).splitlines()[0] == "line 0"
    assert log_tail(tmp_path / "missing.log", 5) == NO_LOG


class SleepingServer(ServerProcess):
    started = ProcessSet()
    log_lines = 3

    def start(self) -> "SleepingServer":
        self.launch(python("""
            import time
            for i in range(10):
                print(f"step {i}", flush=True)
            time.sleep(600)
        """), env=dict(os.environ), header="$ sleeping\n")
        return self


def test_stop_all_stops_every_server_of_its_kind_and_tails_its_log(tmp_path):
    servers = [SleepingServer(tmp_path / f"server-{n}.log").start() for n in (1, 2)]
    for server in servers:
        wait_for(lambda: "step 9" in server.log_path.read_text(), "the server never wrote its log")
        assert server.running() and server in SleepingServer.started
    assert servers[0].log_tail() == "step 7\nstep 8\nstep 9"
    SleepingServer.started.stop_all(PATIENCE_S)
    assert len(SleepingServer.started) == 0
    for server in servers:
        assert not server.running() and server.process.returncode == -signal.SIGTERM
        assert group_members(server.process.pid) == []
    servers[0].stop()              # idempotent
