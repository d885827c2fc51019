"""Shared fixtures: recorded hardware outputs and a `main` runner with an injected system."""
from __future__ import annotations

from pathlib import Path

import pytest

from code.common.systems import SystemDetector, SystemInfo

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / "shared"


def recorded_detector(lscpu: str | None, nvidia_smi: str | None, cpuinfo: str | None = None) -> SystemDetector:
    """A detector that replays files recorded on real machines instead of asking this one."""
    outputs = {"lscpu": lscpu, "nvidia-smi": nvidia_smi}
    files = {"/proc/meminfo": "meminfo.txt", "/etc/os-release": "os-release.txt", "/proc/cpuinfo": cpuinfo}

    def run(argv: list[str]) -> str | None:
        name = outputs.get(argv[0])
        return (FIXTURES / "systems" / name).read_text() if name else None

    def read(path: str) -> str | None:
        name = files.get(path)
        return (FIXTURES / "systems" / name).read_text() if name else None

    return SystemDetector(run=run, read=read, nvml=lambda: None)


@pytest.fixture
def dgx_h100() -> SystemInfo:
    return recorded_detector("dgx_h100_lscpu.txt", "dgx_h100_nvidia_smi.csv").detect()


@pytest.fixture
def kvm_2core() -> SystemInfo:
    return recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip(f"{SHARED} is absent: the shared evaluation data lives beside the repository")
    return SHARED
