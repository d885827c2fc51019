"""Systems the toolkit has configs for, matched by hardware (never by host name).

Each system's `system_type` is what `make generate_conf_files` writes into systems/<id>.json, the category the
round's checkers file its results under (the user may change it with "system_type" in
systems/<id>.overrides.json, spelled exactly "edge", "datacenter", "datacenter,edge" or "edge,datacenter"):

* H100 / H200 SXM, 1 and 8 GPUs: "datacenter", as NVIDIA submits its SXM systems. In v6.1 resnet, bert and yolo
  are not in the datacenter suite (only in the edge and datacenter,edge ones), so such a system submits them only
  when the user declares it "datacenter,edge" (resnet then also needs Server) or "edge";
  `submission.system_json.benchmark_not_in_suite_message` says so.
* L4: "edge", a low-power single-slot card whose CV and NLP results belong to the edge suite.
* generic_cpu and every machine matched to no known system (SystemMatch.system_type): "edge", the suite that
  holds resnet, the toolkit's default benchmark.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..constants import SystemType
from .info import SystemInfo

# Not matched by hardware: the config every CPU-only machine falls back to when nothing nearer exists. Its system
# type is edge (SystemMatch.system_type for a machine that matches no known system).
GENERIC_CPU = "generic_cpu"


@dataclass(frozen=True)
class KnownSystem:
    id: str
    description: str
    system_type: SystemType = SystemType.edge   # the category systems/<id>.json declares; see the module doc
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
    # Datacenter: NVIDIA enters its H100 / H200 SXM systems (one GPU and DGX/HGX eight-GPU) as datacenter systems.
    KnownSystem("H100_SXM_80GBx1", "1x NVIDIA H100 SXM 80GB", SystemType.datacenter,
                gpu_names=("NVIDIA H100 80GB HBM3",), gpu_count=1),
    KnownSystem("H100_SXM_80GBx8", "8x NVIDIA H100 SXM 80GB (DGX H100)", SystemType.datacenter,
                gpu_names=("NVIDIA H100 80GB HBM3",), gpu_count=8),
    KnownSystem("H200_SXM_141GBx1", "1x NVIDIA H200 SXM 141GB", SystemType.datacenter,
                gpu_names=("NVIDIA H200",), gpu_count=1),
    KnownSystem("H200_SXM_141GBx8", "8x NVIDIA H200 SXM 141GB (DGX H200)", SystemType.datacenter,
                gpu_names=("NVIDIA H200",), gpu_count=8),
    # Edge: a low-power single-slot card; resnet, bert and yolo are edge benchmarks in v6.1.
    KnownSystem("L4x1", "1x NVIDIA L4", SystemType.edge, gpu_names=("NVIDIA L4",), gpu_count=1),
)
