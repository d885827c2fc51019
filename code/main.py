"""Entry point: `python3 -m code.main --action=<action> [RUN_ARGS]`, usually through make.

Parses arguments strictly, detects the system once (lazily), and runs one handler per action.
Exit status: 0 success, 1 failure, 2 bad input, 3 action not implemented yet, 130 interrupted.
"""
from __future__ import annotations

import functools
import sys
import traceback
from typing import Callable, Sequence

from .actions import ACTIONS
from .actions.base import Context
from .common.arguments import parse_run_args
from .common.errors import NotImplementedYet, UserError
from .common.paths import Paths
from .common.rules import get_round
from .common.systems import SystemDetector, SystemInfo


def available_benchmarks(paths: Paths, rules_round) -> list[str]:
    """Benchmarks of the rules round that have config classes in this checkout."""
    return [b for b in rules_round.benchmarks if (paths.repo / "configs" / b / "__init__.py").exists()]


def main(argv: Sequence[str] | None = None, detect: Callable[[], SystemInfo] | None = None,
         log: Callable[[str], None] = print) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = any(a == "--verbose" or a.startswith("--verbose=") and a != "--verbose=false" for a in argv)
    try:
        rules = get_round()
        default_paths = Paths.create()
        args = parse_run_args(argv, list(ACTIONS), available_benchmarks(default_paths, rules), list(rules.benchmarks))
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
        return 0
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001  a bug: short message unless --verbose
        if verbose:
            traceback.print_exc()
        else:
            print(f"internal error: {type(error).__name__}: {error}\n"
                  f"Run again with RUN_ARGS=\"... --verbose\" for the traceback.", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
