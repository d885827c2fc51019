"""Hardware detection: CPU (lscpu, /proc/cpuinfo), memory, OS and NVIDIA GPUs (NVML or nvidia-smi).

`SystemDetector` reads everything through two injectable callables, so tests replay recorded
outputs of real machines. It is created once in `main`; nothing is detected at import time.
"""
from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Callable

from .info import CPUInfo, GPUInfo, SystemInfo

Runner = Callable[[list[str]], str | None]   # returns stdout, or None if the command is missing or fails
Reader = Callable[[str], str | None]          # returns file text, or None if unreadable

_CACHE_LINE = re.compile(r"L\d[a-z]? cache")
NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version,compute_cap",
                    "--format=csv,noheader,nounits"]


def run_command(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


class SystemDetector:
    def __init__(self, run: Runner = run_command, read: Reader = read_text,
                 nvml: Callable[[], list[GPUInfo] | None] | None = None) -> None:
        self._run = run
        self._read = read
        self._nvml = nvml if nvml is not None else _gpus_from_nvml

    def detect(self) -> SystemInfo:
        gpus, gpu_note = self.gpus()
        return SystemInfo(cpu=self.cpu(), memory_gib=self.memory_gib(), os_name=self.os_name(),
                          kernel=platform.release(), gpus=tuple(gpus), gpu_note=gpu_note)

    # -- CPU -------------------------------------------------------------------------------------
    def cpu(self) -> CPUInfo:
        fields = _colon_fields(self._run(["lscpu"]) or "")
        if fields.get("Model name"):
            sockets = _int(fields.get("Socket(s)"), 1)
            cores = _int(fields.get("Core(s) per socket"), 0) or _int(fields.get("Core(s) per cluster"), 1)
            caches = tuple(f"{key}: {value}" for key, value in fields.items() if _CACHE_LINE.fullmatch(key))
            return CPUInfo(model=fields["Model name"], vendor=fields.get("Vendor ID", ""),
                           architecture=fields.get("Architecture", platform.machine()), sockets=sockets,
                           cores_per_socket=cores, threads_per_core=_int(fields.get("Thread(s) per core"), 1),
                           max_mhz=_float(fields.get("CPU max MHz")) or self._cpuinfo_mhz(), caches=caches)
        return self._cpu_from_proc()

    def _cpuinfo_mhz(self) -> float | None:
        """The clock /proc/cpuinfo shows (virtual machines often report no maximum to lscpu)."""
        return _float(_colon_fields(self._read("/proc/cpuinfo") or "").get("cpu MHz"))

    def _cpu_from_proc(self) -> CPUInfo:
        text = self._read("/proc/cpuinfo") or ""
        blocks = [_colon_fields(b) for b in text.split("\n\n") if b.strip()]
        logical = len(blocks) or (os.cpu_count() or 1)
        first = blocks[0] if blocks else {}
        sockets = len({b.get("physical id", "0") for b in blocks}) or 1
        cores = _int(first.get("cpu cores"), 0) or max(1, logical // sockets)
        return CPUInfo(model=first.get("model name", platform.processor() or "unknown CPU"),
                       vendor=first.get("vendor_id", ""), architecture=platform.machine(), sockets=sockets,
                       cores_per_socket=cores, threads_per_core=max(1, logical // (sockets * cores)),
                       max_mhz=_float(first.get("cpu MHz")))

    # -- memory and OS ---------------------------------------------------------------------------
    def memory_gib(self) -> float:
        kib = _int(_colon_fields(self._read("/proc/meminfo") or "").get("MemTotal", "0").split()[0], 0)
        return round(kib / 1024 ** 2, 1)

    def os_name(self) -> str:
        for line in (self._read("/etc/os-release") or "").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
        return f"{platform.system()} {platform.release()}"

    # -- GPUs ------------------------------------------------------------------------------------
    def gpus(self) -> tuple[list[GPUInfo], str]:
        from_nvml = self._nvml()
        if from_nvml:
            return from_nvml, ""
        output = self._run(NVIDIA_SMI_QUERY)
        if output is None:
            return [], "no NVIDIA driver found (NVML not loadable, nvidia-smi missing or failing)"
        gpus = [_gpu_from_csv(line) for line in output.splitlines() if line.strip()]
        return gpus, "" if gpus else "nvidia-smi lists no GPU"


def _colon_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return fields


def _float(text: str | None) -> float | None:
    try:
        return float(str(text).strip()) or None
    except (TypeError, ValueError):
        return None


def _int(text: str | None, default: int) -> int:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return default


def _gpu_from_csv(line: str) -> GPUInfo:
    parts = [p.strip() for p in line.split(",")]
    parts += [""] * (4 - len(parts))
    return GPUInfo(name=parts[0], memory_mib=_int(parts[1], 0), driver_version=parts[2],
                   compute_capability=parts[3])


def _gpus_from_nvml() -> list[GPUInfo] | None:
    try:
        import pynvml  # nvidia-ml-py; loads libnvidia-ml only when called
        pynvml.nvmlInit()
    except Exception:  # library missing or no driver: absent is fine, nvidia-smi is tried next
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(GPUInfo(name=_text(pynvml.nvmlDeviceGetName(handle)),
                                memory_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2 ** 20,
                                driver_version=_text(driver), compute_capability=f"{major}.{minor}"))
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
