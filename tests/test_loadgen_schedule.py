"""The raw engine's Server arrivals are LoadGen's own schedule: the real LoadGen, run with a system under test that
completes each query at once, issues its queries at the gaps poisson_server.arrivals computes for the same seed,
and not at those of another seed."""
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from code.common.paths import REPO_ROOT
from code.common.rules import get_round
from code.common.tuning.poisson_server import arrivals

RATE = 200.0       # a mean gap of 5 ms: 300 queries in about 1.5 s
QUERIES = 300


def _issue_times(outdir: Path, seed: int) -> np.ndarray:
    args = [sys.executable, "-m", "tests.test_loadgen_schedule", str(outdir), str(seed)]
    done = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return np.array(json.loads(done.stdout.strip().splitlines()[-1]), dtype=np.int64)


def test_arrivals_are_the_gaps_loadgen_issues_at(tmp_path):
    seed = get_round().seeds.schedule_rng_seed
    issued = _issue_times(tmp_path, seed)
    assert len(issued) >= QUERIES
    observed = np.diff(issued - issued[0])
    same = np.diff(arrivals(RATE, 0, len(issued), seed))
    other = np.diff(arrivals(RATE, 0, len(issued), seed + 1))
    # Each issue comes a little after its time (a wake-up, longer on a loaded machine, which a median leaves out);
    # gaps between two queries match to well under a gap. Two different draws differ by the gap itself at the median
    # (5 ms x ln 2 here), and so do the same draw's gaps one query out of step: the first query is LoadGen's at 0.
    assert np.median(np.abs(observed - same)) < 1e6
    assert np.median(np.abs(observed - other)) > 2e6
    assert np.median(np.abs(observed[1:] - same[:-1])) > 2e6


def main(outdir: str, seed: str) -> None:
    import mlperf_loadgen as lg

    from tests.null_sut import run_null_sut

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Server
    settings.mode = lg.TestMode.PerformanceOnly
    settings.server_target_qps = RATE
    settings.server_target_latency_ns = 1_000_000_000
    settings.min_duration_ms = 1
    settings.min_query_count = QUERIES
    settings.schedule_rng_seed = int(seed)
    issued: list[int] = []
    run_null_sut(lg, settings, out, on_issue=lambda: issued.append(time.perf_counter_ns()))
    print(json.dumps(issued))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
