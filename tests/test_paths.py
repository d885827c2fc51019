import datetime as dt
from pathlib import Path

from code.common.constants import Scenario, TestMode, WorkloadSetting
from code.common.paths import REPO_ROOT, Paths


def test_defaults_need_no_settings():
    paths = Paths.create(now=dt.datetime(2026, 11, 22, 9, 5, 7))
    assert paths.scratch == REPO_ROOT / "scratch"
    assert paths.log_dir == REPO_ROOT / "build" / "logs" / "2026.11.22-09.05.07"
    assert paths.build_link("data") == REPO_ROOT / "build" / "data"


def test_engine_file_name(tmp_path: Path):
    paths = Paths.create(scratch=tmp_path / "s", log_dir=tmp_path / "l", repo=tmp_path)
    engine = paths.engine_file("H100_SXM_80GBx1", "resnet50", Scenario.Offline, "gpu", 2048, "int8",
                               WorkloadSetting(), "plan")
    assert engine == tmp_path / "build/engines/H100_SXM_80GBx1/resnet50/Offline/" \
                                 "resnet50-Offline-gpu-b2048-int8.lwis_k_99_MaxP.plan"


def test_log_and_submission_locations(tmp_path: Path):
    paths = Paths.create(scratch=tmp_path / "s", log_dir=tmp_path / "l", repo=tmp_path)
    assert paths.run_log_dir("sys", "resnet50", Scenario.SingleStream, TestMode.AccuracyOnly) == \
        tmp_path / "l/sys/resnet50/SingleStream/AccuracyOnly"
    assert paths.compliance_log_dir("TEST01", "sys", "resnet50", Scenario.Server) == \
        tmp_path / "build/compliance_logs/TEST01/sys/resnet50/Server"
    assert paths.results_dir(paths.staging, "open", "Org", "sys", "resnet", Scenario.Offline) == \
        tmp_path / "build/submission-staging/open/Org/results/sys/resnet/Offline"
    assert paths.tarball("Org").name == "mlperf-inference-Org-submission.tar.gz"
    assert paths.preprocessed_dir("resnet50", "mobilenet_v2", "foolbox20") == \
        tmp_path / "s/preprocessed_data/resnet50/foolbox20/mobilenet_v2"
