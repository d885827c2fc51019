"""What the toolkit knows about the machine it runs on: plain immutable records."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class CPUInfo:
    model: str
    vendor: str
    architecture: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    max_mhz: float | None = None       # highest clock lscpu reports (else the clock /proc/cpuinfo shows)
    caches: tuple[str, ...] = ()       # lscpu's cache lines, e.g. "L2 cache: 1 MiB (2 instances)"

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def threads(self) -> int:
        return self.cores * self.threads_per_core


@dataclass(frozen=True)
class GPUInfo:
    name: str
    memory_mib: int
    driver_version: str = ""
    compute_capability: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


@dataclass(frozen=True)
class SystemInfo:
    cpu: CPUInfo
    memory_gib: float
    os_name: str
    kernel: str
    gpus: tuple[GPUInfo, ...] = ()
    gpu_note: str = ""   # why no GPU was found (no driver, no nvidia-smi, ...)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def accelerator(self) -> str:
        """Name of the (first) GPU model, or "" on a CPU-only machine."""
        return self.gpus[0].name if self.gpus else ""

    def as_dict(self) -> dict:
        data = asdict(self)
        data["cpu"]["cores"] = self.cpu.cores
        data["cpu"]["threads"] = self.cpu.threads
        return data


def _token(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]+", "_", text)).strip("_")


_CPU_NOISE = re.compile(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@.*$|\b\d+-Core\b", re.IGNORECASE)
_GPU_NOISE = re.compile(r"^NVIDIA\s+|\bTesla\b|\bGeForce\b", re.IGNORECASE)


def short_gpu_name(name: str, memory_mib: int) -> str:
    """`NVIDIA H100 80GB HBM3` -> `H100_80GB_HBM3`; adds the memory size when the name lacks it."""
    base = _token(_GPU_NOISE.sub("", name).strip())
    if not re.search(r"\d+GB", base):
        base = f"{base}_{round(memory_mib / 1024)}GB"
    return base


def derived_system_id(info: SystemInfo) -> str:
    """A stable id from the hardware alone, used for machines no known system matches."""
    if info.gpus:
        gpu = info.gpus[0]
        return f"{short_gpu_name(gpu.name, gpu.memory_mib)}x{len(info.gpus)}"
    model = _token(_CPU_NOISE.sub(" ", info.cpu.model)) or _token(info.cpu.vendor) or "CPU"
    sockets = f"_{info.cpu.sockets}S" if info.cpu.sockets > 1 else ""
    return f"{model}{sockets}_{info.cpu.cores}C"
