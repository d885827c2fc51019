"""The wait of `make serve_triton` and `make serve_llm`: a started server serves until a stop signal (Ctrl-C,
SIGTERM, or the terminal closing), and is then stopped in order; a server that exits by itself ends the command
with the end of its log."""
from __future__ import annotations

import signal
import threading
from typing import Sequence

from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.processes import STOP_SIGNALS


def serve_until_stopped(ctx, server, what: str, port: int, announce: Sequence[str]) -> int:
    """Log `announce`, wait while `server` (running(), process, log_path, log_tail(), stop()) runs, stop it."""
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in STOP_SIGNALS}
    try:
        for line in announce:
            ctx.log(line)
        while not stop.wait(1.0):
            if not server.running():
                raise UserError(f"The {what} server on port {port} exited (status {server.process.returncode}). "
                                f"The end of its log ({server.log_path}):\n{server.log_tail()}",
                                exit_code=EXIT_FAILURE)
        ctx.log(f"Stopping the {what} server on port {port} ...")
    finally:
        server.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return EXIT_OK
