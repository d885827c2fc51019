#!/usr/bin/env python3
"""Print the Makefile's targets with their `## ` descriptions (standard library only: runs before .venv)."""
import re
import sys

TARGET = re.compile(r"^([a-zA-Z_][a-zA-Z0-9_]*):.*?## (.*)$")


def main(makefile: str) -> None:
    print("Usage: make <target> [RUN_ARGS=\"--benchmarks=... --scenarios=... --test_mode=...\"]\n\nTargets:")
    for line in open(makefile, encoding="utf-8"):
        match = TARGET.match(line)
        if match:
            print(f"  {match.group(1):<20} {match.group(2)}")
    print("\nVariables: RUN_ARGS (flags, see `make show_config RUN_ARGS=--help`), SUBMITTER (organisation),\n"
          "  MLPERF_SCRATCH_PATH (data, models, preprocessed data; default ./scratch), LOG_DIR (default\n"
          "  build/logs/<YYYY.MM.DD-HH.MM.SS>), BENCHMARKS (comma list), SYSTEM_NAME (system id to use).\n"
          "Container targets: BASE_IMAGE (image to build from), NO_BUILD=1 (no make build in the image),\n"
          "  DOCKER_COMMAND (run it headless), DOCKER_ARGS (more docker run flags), MIG_CONF (MIG instances per GPU);\n"
          "  see documentation/docker.md.")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "Makefile")
