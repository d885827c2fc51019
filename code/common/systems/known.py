"""Systems the toolkit has configs for, matched by hardware (never by host name)."""
from __future__ import annotations

from dataclasses import dataclass

from ..constants import SystemType
from .info import SystemInfo

# Not matched by hardware: the config every CPU-only machine falls back to when nothing nearer exists.
GENERIC_CPU = "generic_cpu"


@dataclass(frozen=True)
class KnownSystem:
    id: str
    description: str
    system_type: SystemType = SystemType.edge
    gpu_names: tuple[str, ...] = ()   # GPU model names as NVML / nvidia-smi print them
    gpu_count: int = 0
    cpu_model: str = ""               # CPU-only systems: substring of the CPU model name
    cpu_cores: int = 0                # CPU-only systems: total physical cores

    @property
    def is_gpu(self) -> bool:
        return bool(self.gpu_names)

    def matches(self, info: SystemInfo) -> bool:
        if self.is_gpu:
            accepted = {n.lower() for n in self.gpu_names}
            return len(info.gpus) == self.gpu_count and all(g.name.strip().lower() in accepted for g in info.gpus)
        if info.gpus or not self.cpu_model:
            return False
        return self.cpu_model.lower() in info.cpu.model.lower() and info.cpu.cores == self.cpu_cores


KNOWN_SYSTEMS: tuple[KnownSystem, ...] = (
    KnownSystem("H100_SXM_80GBx1", "1x NVIDIA H100 SXM 80GB", SystemType.datacenter,
                gpu_names=("NVIDIA H100 80GB HBM3",), gpu_count=1),
    KnownSystem("H100_SXM_80GBx8", "8x NVIDIA H100 SXM 80GB (DGX H100)", SystemType.datacenter,
                gpu_names=("NVIDIA H100 80GB HBM3",), gpu_count=8),
    KnownSystem("H200_SXM_141GBx1", "1x NVIDIA H200 SXM 141GB", SystemType.datacenter,
                gpu_names=("NVIDIA H200",), gpu_count=1),
    KnownSystem("H200_SXM_141GBx8", "8x NVIDIA H200 SXM 141GB (DGX H200)", SystemType.datacenter,
                gpu_names=("NVIDIA H200",), gpu_count=8),
    KnownSystem("L4x1", "1x NVIDIA L4", SystemType.edge, gpu_names=("NVIDIA L4",), gpu_count=1),
)
