"""The VBench runner the MLCommons endpoints client's VBenchScorer calls for wan-2.2-t2v-a14b's accuracy data set
(endpoints.py points its `uv_executable` at a launcher that runs this module):

    <launcher> run --project <folder> python <folder>/vbench_runner.py --videos-dir D --out-dir O --name N --dims ...

The client has staged the videos in D as VBench names them (`<prompt>-0.mp4`); this runs the toolkit's VBench on
them (vbench.py: the reference's command in .venv-vbench, checkpoints from VBENCH_CACHE_DIR) and writes
`O/<N>_eval_results.json` in VBench's own shape, which the client reads. Where VBench cannot run it says why and
exits 1, and the client's run fails with that sentence in its log.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..common.errors import UserError
from ..common.paths import Paths
from .accuracy import DIMENSIONS


def parse(argv: list[str]) -> argparse.Namespace:
    """The runner's own arguments: what follows `run --project <folder> python <runner>`."""
    rest = argv[argv.index("python") + 2:] if "python" in argv else argv
    parser = argparse.ArgumentParser(prog="wan VBench runner for the endpoints client")
    parser.add_argument("--videos-dir", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--dims", required=True)
    parser.add_argument("--full-info-json", default=None)
    return parser.parse_args(rest)


def main(argv: list[str] | None = None) -> int:
    from . import vbench

    args = parse(list(sys.argv[1:] if argv is None else argv))
    dims = tuple(d for d in args.dims.split(",") if d)
    if set(dims) != set(DIMENSIONS):
        print(f"The toolkit's VBench runs the round's six dimensions ({', '.join(DIMENSIONS)}), not {args.dims}.",
              file=sys.stderr)
        return 2
    paths = Paths.create()
    why = vbench.why_not_run(paths)
    if why is not None:
        print(f"No VBench score of {args.videos_dir}: {why}.", file=sys.stderr)
        return 1
    try:
        found = vbench.run_vbench(paths, args.videos_dir, args.out_dir)
    except UserError as error:
        print(str(error), file=sys.stderr)
        return 1
    shutil.copyfile(found, args.out_dir / f"{args.name}_eval_results.json")
    print(f"VBench's results: {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
