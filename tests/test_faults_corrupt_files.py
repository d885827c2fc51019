"""Fault injection, corrupt or partial files: a damaged metadata.json is skipped and named, never fatal; a
truncated or changed engine or preprocessed sample is rebuilt, never "up to date"; a damaged input met while
running is named with the make target that rebuilds it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.audit.references import find_references
from code.common.harness.engine_build import build_engine, locate_engine
from code.common.errors import UserError
from code.common.records.metadata import UnreadableRecord, read_metadata
from code.common.paths import Paths
from code.common.records.runs import load_records
from code.main import main
from code.resnet50.benchmark import BENCHMARK
from tests.conftest import EMBEDDED, FOOLBOX, REPO, seed_downloads
from tests.run_records import resolved_config, write_record
from tests.test_engines import SYSTEM, FakeBenchmark, _config, paths  # noqa: F401  (paths: a fixture)

MODEL, DATASET = "mobilenet_v2", "foolbox20"


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def _damaged_records(root: Path) -> dict[str, Path]:
    """Two good records and one of each kind of damage, as run folders under `root`."""
    runs = {name: write_record(root / name, value=value) for name, value in (("good1", 100.0), ("good2", 120.0))}
    for name in ("truncated", "not_an_object", "other_schema", "field_missing", "not_utf8"):
        runs[name] = write_record(root / name, value=999.0)
    _truncate(runs["truncated"] / "metadata.json")
    (runs["not_an_object"] / "metadata.json").write_text("[1, 2]\n")
    record = json.loads((runs["other_schema"] / "metadata.json").read_text())
    (runs["other_schema"] / "metadata.json").write_text(json.dumps({**record, "schema_version": 99}))
    del record["benchmark"]
    (runs["field_missing"] / "metadata.json").write_text(json.dumps(record))
    (runs["not_utf8"] / "metadata.json").write_bytes(b"\xff\xfe{" + b"\x00" * 10)
    return runs


# -- metadata.json ----------------------------------------------------------------------------------------
def test_read_metadata_names_the_file_and_why(tmp_path: Path) -> None:
    runs = _damaged_records(tmp_path)
    reasons = {"truncated": "not valid JSON, truncated or damaged", "not_an_object": "holds no JSON object",
               "other_schema": "metadata schema 99", "field_missing": '"benchmark" is missing',
               "not_utf8": "not UTF-8 text"}
    for name, reason in reasons.items():
        with pytest.raises(UnreadableRecord) as error:
            read_metadata(runs[name] / "metadata.json")
        assert error.value.exit_code == 1 and reason in str(error.value)
        assert str(runs[name] / "metadata.json") in str(error.value)
    assert read_metadata(runs["good1"] / "metadata.json").metric.value == 100.0


def test_load_records_skips_each_damaged_record_with_one_named_line(tmp_path: Path) -> None:
    runs = _damaged_records(tmp_path / "logs")
    lines: list[str] = []
    # The same tree given twice (build/logs and LOG_DIR's parent often coincide): each record once.
    records = load_records([tmp_path / "logs", tmp_path / "logs"], lines.append)
    assert sorted(r.log_dir for r in records) == [str(runs["good1"]), str(runs["good2"])]
    assert len(lines) == 5
    for name in ("truncated", "not_an_object", "other_schema", "field_missing", "not_utf8"):
        [line] = [line for line in lines if str(runs[name] / "metadata.json") in line]
        assert line.startswith("skipped ") and "that run is left out" in line


def test_find_references_skips_a_truncated_record(tmp_path: Path) -> None:
    runs = _damaged_records(tmp_path / "logs")
    lines: list[str] = []
    reference = find_references([tmp_path / "logs"], "box", resolved_config(), lines.append)
    assert reference.performance.log_dir == str(runs["good2"])
    assert any(str(runs["truncated"] / "metadata.json") in line for line in lines)


def _repo_copy(tmp_path: Path) -> Path:
    for name in ("code", "configs"):
        shutil.copytree(REPO / name, tmp_path / "repo" / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "repo"


def _toolkit(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args, f"--scratch_path={repo / 'scratch'}"],
                          cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                          check=False)


@pytest.mark.parametrize("action", ["generate_conf_files", "stage_results", "run_audit_harness"])
def test_a_truncated_record_never_stops_a_step(tmp_path: Path, action: str) -> None:
    """Only a truncated record in build/logs: each step names it and goes on to its own verdict (nothing to
    do), exit 1, and never an internal error."""
    repo = _repo_copy(tmp_path)
    run_dir = write_record(repo / "build" / "logs" / "2026.01.01-00.00.00" / "box" / "resnet50" / "Offline", 100.0)
    _truncate(run_dir / "metadata.json")
    done = _toolkit(repo, f"--action={action}", "--allow_test_runs", "--submitter=TestOrg", *EMBEDDED,
                    "--scenarios=offline")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert f"skipped {run_dir / 'metadata.json'}: not valid JSON, truncated or damaged" in done.stdout
    assert "internal error" not in output and "Traceback" not in output
    assert {"generate_conf_files": "No performance run to describe", "stage_results": "Nothing to stage",
            "run_audit_harness": "missing (no completed run in build/logs)"}[action] in done.stderr


# -- engines ------------------------------------------------------------------------------------------------
def test_a_truncated_engine_is_rebuilt_not_up_to_date(paths: Paths) -> None:
    bench = FakeBenchmark()
    first = build_engine(_config(), SYSTEM, paths, bench, lambda _: None)
    manifest = json.loads(paths.engine_manifest(first.path).read_text())
    assert manifest["engine_size"] == first.path.stat().st_size and len(manifest["engine_sha256"]) == 64
    _truncate(first.path)
    with pytest.raises(UserError) as error:
        locate_engine(_config(), SYSTEM, paths, bench)
    assert error.value.exit_code == 1 and "truncated or replaced" in str(error.value)
    assert 'make generate_engines RUN_ARGS="--benchmarks=fakebench --scenarios=Offline"' in str(error.value)
    lines: list[str] = []
    again = build_engine(_config(), SYSTEM, paths, bench, lines.append)
    assert again.rebuilt and not any("up to date" in line for line in lines)
    assert any(line.startswith("rebuilding: ") and "truncated or replaced" in line for line in lines)
    assert locate_engine(_config(), SYSTEM, paths, bench) == first.path


def test_an_engine_changed_in_place_is_rebuilt(paths: Paths) -> None:
    bench = FakeBenchmark()
    engine = build_engine(_config(), SYSTEM, paths, bench, lambda _: None).path
    data = bytearray(engine.read_bytes())
    data[len(data) // 2] ^= 0xFF                      # same size, other bytes
    engine.write_bytes(bytes(data))
    with pytest.raises(UserError, match="does not match the sha256 recorded when it was made"):
        locate_engine(_config(), SYSTEM, paths, bench)
    assert build_engine(_config(), SYSTEM, paths, bench, lambda _: None).rebuilt


def test_a_manifest_without_digests_means_rebuild(paths: Paths) -> None:
    bench = FakeBenchmark()
    engine = build_engine(_config(), SYSTEM, paths, bench, lambda _: None).path
    manifest_path = paths.engine_manifest(engine)
    manifest = json.loads(manifest_path.read_text())
    del manifest["engine_sha256"], manifest["engine_size"]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(UserError, match="records no size and sha256"):
        locate_engine(_config(), SYSTEM, paths, bench)
    _truncate(manifest_path)
    with pytest.raises(UserError, match="no readable manifest"):
        locate_engine(_config(), SYSTEM, paths, bench)
    assert build_engine(_config(), SYSTEM, paths, bench, lambda _: None).rebuilt


def test_a_truncated_model_names_download_model(paths: Paths) -> None:
    _truncate(paths.model_file("fakebench", "tiny"))
    with pytest.raises(UserError) as error:
        build_engine(_config(), SYSTEM, paths, FakeBenchmark(), lambda _: None)
    assert error.value.exit_code == 1 and "is not a readable ONNX model" in str(error.value)
    assert 'make download_model RUN_ARGS="--benchmarks=fakebench --model=tiny"' in str(error.value)


# -- preprocessed data ---------------------------------------------------------------------------------------
@pytest.fixture
def foolbox_paths(tmp_path: Path) -> Paths:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    seed_downloads(paths, FOOLBOX)
    BENCHMARK.download_data(DATASET, paths, lambda _: None)
    return paths


def _mtimes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.suffix == ".npy"}


def test_a_truncated_sample_is_named_then_preprocessed_again(foolbox_paths: Paths) -> None:
    images = BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lambda _: None)
    manifest = json.loads((images.directory / "manifest.json").read_text())
    assert sorted(manifest["files"]) == sorted([*images.file_names, "val_map.txt"])
    victim = images.directory / images.file_names[3]
    assert manifest["files"][victim.name]["size"] == victim.stat().st_size
    before = _mtimes(images.directory)
    _truncate(victim)

    with pytest.raises(UserError) as error:     # what run_harness and calibration open
        BENCHMARK.preprocessed(MODEL, DATASET, foolbox_paths)
    assert error.value.exit_code == 1 and f"{victim} is " in str(error.value)
    assert "truncated or replaced" in str(error.value) and "make preprocess_data" in str(error.value)

    lines: list[str] = []
    again = BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lines.append)
    assert not any("up to date" in line for line in lines)
    assert any(f"(first: {victim.name} is " in line and "preprocessing them again" in line for line in lines)
    after = _mtimes(images.directory)
    assert [name for name in after if after[name] != before[name]] == [victim.name]   # only the damaged one
    assert again.load(3).shape == (3, 224, 224)


def test_a_sample_changed_in_place_is_caught_by_its_sha256(foolbox_paths: Paths) -> None:
    images = BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lambda _: None)
    victim = images.directory / images.file_names[5]
    data = bytearray(victim.read_bytes())
    data[-7] ^= 0xFF                                   # same size: only the digest tells
    victim.write_bytes(bytes(data))
    lines: list[str] = []
    BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lines.append)
    assert any("does not match the sha256 recorded when it was made" in line for line in lines)
    assert not any("up to date" in line for line in lines)


def test_a_sample_with_a_damaged_header_is_named_when_loaded(foolbox_paths: Paths) -> None:
    images = BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lambda _: None)
    victim = images.directory / images.file_names[0]
    data, stat = bytearray(victim.read_bytes()), victim.stat()
    data[:6] = b"XXXXXX"                                # same size, not an .npy any more
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))   # and its time put back: not hashed when opened
    opened = BENCHMARK.preprocessed(MODEL, DATASET, foolbox_paths)   # size and time match: opened
    with pytest.raises(UserError) as error:
        opened.load(0)
    assert error.value.exit_code == 1 and str(victim) in str(error.value)
    assert f'make preprocess_data RUN_ARGS="--benchmarks=resnet50 --model={MODEL} --dataset={DATASET}"' in \
        str(error.value)


def test_a_truncated_preprocessed_manifest_means_preprocess_again(foolbox_paths: Paths) -> None:
    images = BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lambda _: None)
    _truncate(images.directory / "manifest.json")
    with pytest.raises(UserError, match="is not preprocessed .*make preprocess_data"):
        BENCHMARK.preprocessed(MODEL, DATASET, foolbox_paths)
    lines: list[str] = []
    BENCHMARK.preprocess(MODEL, DATASET, foolbox_paths, lines.append)
    assert any("manifest.json is unreadable or from an older version" in line for line in lines)
    assert BENCHMARK.preprocessed(MODEL, DATASET, foolbox_paths).load(0).shape == (3, 224, 224)


def test_run_harness_names_a_truncated_sample_before_anything_runs(scratch: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Through code.main, on a copy of the session's embedded-default scratch: exit 1, the file and the target
    named, no run folder written."""
    copy = tmp_path / "scratch"
    shutil.copytree(scratch, copy, symlinks=True)
    samples = Paths.create(scratch=copy).preprocessed_dir("resnet50", MODEL, DATASET)
    victim = sorted(samples.glob("*.npy"))[0]
    _truncate(victim)
    code = main(["--action=run_harness", f"--scratch_path={copy}", f"--log_dir={tmp_path / 'logs'}", *EMBEDDED,
                 "--scenarios=offline", "--test_run"], log=lambda _: None)
    err = capsys.readouterr().err
    assert code == 1, err
    assert str(victim) in err and "make preprocess_data" in err and "internal error" not in err
    assert not list(tmp_path.rglob("metadata.json"))


def test_a_run_without_its_user_conf_is_named_by_generate_conf_files(tmp_path: Path) -> None:
    from code.common.rules import get_round
    from code.common.submission.measurements import write_measurements

    run_dir = write_record(tmp_path / "run", 100.0)
    (run_dir / "user.conf").unlink()
    record = read_metadata(run_dir / "metadata.json")
    with pytest.raises(UserError) as error:
        write_measurements(Paths.create(repo=tmp_path / "repo"), record, get_round().benchmark("resnet50"), BENCHMARK)
    assert error.value.exit_code == 1 and str(run_dir / "user.conf") in str(error.value)
    assert 'make run_harness RUN_ARGS="--benchmarks=resnet50 --scenarios=Offline --test_run ' \
           '--test_mode=PerformanceOnly"' in str(error.value)
