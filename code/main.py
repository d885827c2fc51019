"""Entry point: `python3 -m code.main --action=<action> [RUN_ARGS]`, usually through make.

Parses arguments strictly, detects the system once (lazily), and runs one handler per action.
Exit status (named in code/common/errors.py): 0 success, 1 failure, 2 bad input, 3 action not implemented yet,
128 + N when signal N stopped it (130 SIGINT, 143 SIGTERM, 129 SIGHUP). SIGTERM and SIGHUP are raised as
KeyboardInterrupt, like Ctrl-C, so every step's cleanup runs (a harness child is stopped and its test recorded as
interrupted).
"""
from __future__ import annotations

import functools
import signal
import sys
import threading
import traceback
from typing import Callable, Sequence

from .actions import ACTIONS, current_names
from .actions.base import Context
from .common.arguments import expand_run_args, parse_run_args
from .common.disk_full import disk_full_message
from .common.errors import EXIT_FAILURE, EXIT_OK, NotImplementedYet, UserError, signal_exit_status
from .common.paths import Paths
from .common.rules import get_round
from .common.systems import SystemDetector, SystemInfo


EXTRA_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)   # SIGINT is Python's KeyboardInterrupt already


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread where Ctrl-C would raise KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stop(signum, frame) -> None:  # noqa: ARG001
    raise StopSignal(signum)


def raise_on_stop_signals() -> Callable[[], None]:
    """Make SIGTERM and SIGHUP raise StopSignal; returns what puts the previous handlers back. A signal the
    toolkit was started to ignore (`nohup` ignores SIGHUP) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None   # signal handlers belong to the main thread
    previous = {signum: signal.signal(signum, _raise_stop) for signum in EXTRA_STOP_SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return restore


def interrupted_status(stop: KeyboardInterrupt) -> int:
    """The exit status of a stop: the signal's, as a shell reports a process that a signal ended."""
    return signal_exit_status(getattr(stop, "signum", signal.SIGINT))


def wants_tracebacks(argv: Sequence[str]) -> bool:
    """--verbose, typed directly or in RUN_ARGS, known before the arguments are parsed (which may fail)."""
    try:
        flags = expand_run_args(argv)
    except UserError:
        flags = list(argv)
    return any(a == "--verbose" or a.startswith("--verbose=") and a != "--verbose=false" for a in flags)


def available_benchmarks(paths: Paths, rules_round) -> list[str]:
    """Benchmarks of the rules round that have config classes in this checkout."""
    return [b for b in rules_round.benchmarks if (paths.configs_dir(b) / "__init__.py").exists()]


def main(argv: Sequence[str] | None = None, detect: Callable[[], SystemInfo] | None = None,
         log: Callable[[str], None] = print) -> int:
    argv, renamed = current_names(list(sys.argv[1:] if argv is None else argv))
    if renamed:
        log(renamed)
    verbose = wants_tracebacks(argv)
    restore_signal_handlers = raise_on_stop_signals()
    paths = Paths.create()
    try:
        rules = get_round()
        default_paths = paths
        args = parse_run_args(argv, list(ACTIONS), available_benchmarks(default_paths, rules), list(rules.benchmarks))
        args = args.with_only_accuracy_target(
            {name: bench.accuracy_targets for name, bench in rules.benchmarks.items()})
        if args.audit_test and args.audit_test.upper() not in rules.compliance_tests:
            raise UserError(f"Unknown audit test '{args.audit_test}'. Valid choices for {rules.version}: "
                            f"{', '.join(rules.compliance_tests)}.")
        action = ACTIONS[args.action]
        if action.handler is None:
            raise NotImplementedYet(action.name, action.planned_in or "a later version")
        paths = Paths.create(scratch=args.scratch_path, log_dir=args.log_dir)
        # Memoised: the system is detected once per process, however many contexts ask.
        detect_once = functools.cache(detect or SystemDetector().detect)
        ctx = Context(args=args, paths=paths, rules=rules, detect=detect_once, log=log)
        return action.load()(ctx).run()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        if verbose:
            traceback.print_exc()
        return error.exit_code
    except BrokenPipeError:  # output piped into `head` and the like: not an error of ours
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt as stop:   # Ctrl-C, or SIGTERM/SIGHUP as StopSignal
        print(f"Stopped by {stop}." if isinstance(stop, StopSignal) else "Interrupted.", file=sys.stderr)
        return interrupted_status(stop)
    except Exception as error:  # noqa: BLE001  a bug: short message unless --verbose
        full = disk_full_message(error, (paths.log_dir, paths.build, paths.scratch, paths.repo))
        if full is not None:    # not a bug: a disk the action writes to is full
            print(f"error: {full}", file=sys.stderr)
            if verbose:
                traceback.print_exc()
            return EXIT_FAILURE
        if verbose:
            traceback.print_exc()
        else:
            print(f"internal error: {type(error).__name__}: {error}\n"
                  f"Run again with RUN_ARGS=\"... --verbose\" for the traceback.", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        restore_signal_handlers()


if __name__ == "__main__":
    sys.exit(main())
