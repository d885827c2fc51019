"""A LoadGen test against a system under test that completes every query at once, for tests of LoadGen's own
behaviour (its early stopping counts, its schedule). Run it in a process of its own: LoadGen keeps global state."""
from pathlib import Path
from typing import Callable


def run_null_sut(lg, settings, outdir: Path, on_issue: Callable[[], None] = lambda: None) -> None:
    """`settings` run to the end, logs in `outdir`; `on_issue` is called as each query arrives, before it
    completes."""
    def issue(queries):
        on_issue()
        lg.QuerySamplesComplete([lg.QuerySampleResponse(q.id, 0, 0) for q in queries])

    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(16, 16, lambda samples: None, lambda samples: None)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.enable_trace = False
    lg.StartTestWithLogSettings(sut, qsl, settings, log_settings, "")
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)
