"""`python3 -m code.docker --action=<target> [flags]`: the container targets, from make (see the Makefile's
DOCKER_MAIN). Exit status as code.main's: 0 done, 1 a failure, 2 bad input; launch_docker with DOCKER_COMMAND
returns the command's own status."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..common.errors import EXIT_SIGNAL_BASE, UserError
from ..common.paths import Paths
from .mig import parse_mig_conf
from .workflow import Request, Workflow, parse_switch, split_docker_args

ACTIONS = ("build_docker", "docker_add_user", "launch_docker", "prebuild", "configure_mig", "teardown_mig")
_PASSED_ON = ("scratch_path", "log_dir", "submitter", "benchmarks", "system_name", "run_args")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m code.docker", description=__doc__.splitlines()[0])
    parser.add_argument("--action", required=True, choices=ACTIONS)
    parser.add_argument("--base_image", help="BASE_IMAGE: the image to build from (default: the flavour's)")
    parser.add_argument("--no_build", help="NO_BUILD=1: make build_docker does not run make build in the image")
    parser.add_argument("--docker_args", help="DOCKER_ARGS: more docker run flags")
    parser.add_argument("--docker_command", help="DOCKER_COMMAND: run this command headless and return its status")
    parser.add_argument("--mig_conf", help="MIG_CONF: MIG instances per GPU (a number), ALL or OFF")
    for name in _PASSED_ON:
        parser.add_argument(f"--{name}")
    return parser


def request_of(argv: Sequence[str]) -> tuple[str, Request]:
    args = parser().parse_args(argv)
    if args.base_image is not None and not args.base_image.strip():
        raise UserError("BASE_IMAGE is empty: name an image (BASE_IMAGE=debian:bookworm) or leave it unset.")
    passthrough = tuple(f"--{name}={getattr(args, name)}" for name in _PASSED_ON if getattr(args, name))
    return args.action, Request(
        base_image=args.base_image, no_build=parse_switch("NO_BUILD", args.no_build),
        docker_args=split_docker_args(args.docker_args), docker_command=args.docker_command or None,
        mig_conf=args.mig_conf, scratch_path=args.scratch_path, passthrough=passthrough)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        action, request = request_of(sys.argv[1:] if argv is None else argv)
        parse_mig_conf(request.mig_conf)       # refused before anything is built
        return getattr(Workflow(Paths.create(), request), action)()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return EXIT_SIGNAL_BASE + 2


if __name__ == "__main__":
    sys.exit(main())
