"""`systems/<system>.json`: filled from detection where it can be, from the user's overrides file elsewhere.

Every value is a string, as in published submissions: the checker rejects falsy values of fields that must be
meaningful, so a CPU-only system says `"accelerators_per_node": "0"`, never 0. What detection cannot know
(status, cooling, memory configuration, networking, notes...) stays "" until the user fills it in
`systems/<system>.overrides.json`; `require_complete` refuses to go on while any field is empty.
"""
from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..constants import SystemType
from ..errors import UserError
from ..fileio import write_atomically
from ..paths import REPO_ROOT
from ..rules import RulesRound
from ..systems.info import SystemInfo

EXIT_PRECONDITION = 1
STATUSES = ("available", "preview", "rdi")
DIVISIONS = ("closed", "open", "network")
NOT_APPLICABLE = "N/A"
# Meaningless without an accelerator: "N/A" on a CPU-only system rather than a question to the user.
ACCELERATOR_DETAIL_FIELDS = (
    "accelerator_frequency", "accelerator_host_interconnect", "accelerator_interconnect",
    "accelerator_interconnect_topology", "accelerator_memory_configuration", "accelerator_on-chip_memories",
)
# Distribution name -> how the software stack line names it.
SOFTWARE_PACKAGES = (("onnxruntime", "ONNX Runtime"), ("onnxruntime-gpu", "ONNX Runtime GPU"),
                     ("mlcommons-loadgen", "LoadGen"), ("tensorrt", "TensorRT"))
# Block devices that are not disks (loop files, RAM, device-mapper, optical, network).
_VIRTUAL_BLOCK = ("loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd")


def software_versions() -> dict[str, str]:
    """Python and the installed packages of the stack that matter for the results."""
    found = {"Python": platform.python_version()}
    for dist, label in SOFTWARE_PACKAGES:
        try:
            found[label] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def _size(num_bytes: float) -> str:
    """Decimal units, as disks are sold: "512 GB", "1.9 TB"."""
    gb = num_bytes / 1e9
    return f"{gb / 1000:.1f} TB" if gb >= 1000 else f"{round(gb)} GB"


def detect_storage(path: Path, sys_block: Path = Path("/sys/block")) -> tuple[str, str]:
    """(capacity, type) of the storage holding `path`; "" where unknown, for the user to fill.

    The type is the consensus of the machine's real disks: all non-rotational -> "SSD" ("NVMe SSD" when
    all are NVMe), all rotational -> "HDD". Virtual disks (vd*, xvd*) report rotational=1 whatever lies
    behind them, so they make the type unknown rather than a wrong "HDD".
    """
    try:
        capacity = _size(shutil.disk_usage(path).total)
    except OSError:
        capacity = ""
    kinds: dict[str, bool] = {}
    try:
        for dev in sorted(sys_block.iterdir()):
            if not dev.name.startswith(_VIRTUAL_BLOCK):
                kinds[dev.name] = (dev / "queue" / "rotational").read_text().strip() == "1"
    except OSError:
        return capacity, ""
    if not kinds or any(name.startswith(("vd", "xvd")) for name in kinds):
        return capacity, ""
    if all(kinds.values()):
        return capacity, "HDD"
    if not any(kinds.values()):
        return capacity, "NVMe SSD" if all(n.startswith("nvme") for n in kinds) else "SSD"
    return capacity, ""


def _as_value(value: Any) -> Any:
    """Numbers become strings (0 must read "0"); other JSON values are kept as the user wrote them."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def describe_system(info: SystemInfo, system_id: str, division: str, submitter: str, system_type: str,
                    framework: str, overrides: Mapping[str, Any], rules: RulesRound, *,
                    software: Mapping[str, str] | None = None,
                    storage: tuple[str, str] | None = None) -> dict[str, Any]:
    """Every field of `rules.system_json_fields`, detected where possible; non-empty overrides win.

    `software` (name -> version) and `storage` ((capacity, type)) default to detection on this machine
    (storage: the disk holding the repo).
    `host_processor_core_count` is cores per processor, as in NVIDIA's published systems (2x Xeon 8480C:
    processors_per_node "2", core_count "56").
    """
    if division not in DIVISIONS:
        raise UserError(f"Unknown division '{division}'; expected one of {', '.join(DIVISIONS)}.")
    types = [member.value for member in SystemType]
    if system_type not in types:
        raise UserError(f"Unknown system type '{system_type}'; expected one of {', '.join(types)}.")
    software = software_versions() if software is None else software
    storage_capacity, storage_type = detect_storage(REPO_ROOT) if storage is None else storage
    gpus = info.gpus
    stack = [f"{name} {version}" for name, version in software.items()]
    if gpus and gpus[0].driver_version:
        stack.append(f"NVIDIA driver {gpus[0].driver_version}")
    gpu_part = f"{len(gpus)}x {gpus[0].name}" if gpus else "CPU only"
    detected: dict[str, Any] = {
        "division": division,
        "submitter": submitter,
        "system_type": system_type,
        "framework": framework,
        "system_name": f"{system_id} ({gpu_part}, {framework})",
        "number_of_nodes": "1",
        "host_processor_model_name": info.cpu.model,
        "host_processors_per_node": str(info.cpu.sockets),
        "host_processor_core_count": str(info.cpu.cores_per_socket),
        "host_processor_frequency": f"{info.cpu.max_mhz:.0f} MHz" if info.cpu.max_mhz else "",
        "host_processor_caches": ", ".join(info.cpu.caches),
        "host_memory_capacity": f"{round(info.memory_gib)} GB",
        "host_storage_capacity": storage_capacity,
        "host_storage_type": storage_type,
        "accelerators_per_node": str(len(gpus)),
        "accelerator_model_name": gpus[0].name if gpus else NOT_APPLICABLE,
        "accelerator_memory_capacity": f"{round(gpus[0].memory_gib)} GB" if gpus else NOT_APPLICABLE,
        "operating_system": info.os_name,
        "other_software_stack": ", ".join(stack),
    }
    if not gpus:
        detected.update(dict.fromkeys(ACCELERATOR_DETAIL_FIELDS, NOT_APPLICABLE))
    data: dict[str, Any] = {name: detected.get(name, "") for name in rules.system_json_fields}
    for key, value in overrides.items():
        if not _is_empty(value):  # an empty override means "not filled in yet", not "blank it out"
            data[key] = _as_value(value)
    return data


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def empty_fields(data: Mapping[str, Any], rules: RulesRound) -> list[str]:
    """Required fields that are missing, None or blank, in the rules' order."""
    return [name for name in rules.system_json_fields if _is_empty(data.get(name))]


def load_overrides(path: Path) -> dict[str, Any]:
    """The user's values for `systems/<id>.overrides.json`; {} when there is no such file."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UserError(f"{path} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}). "
                        "Fix it and run again.", exit_code=EXIT_PRECONDITION) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold one JSON object (field -> value), not {type(data).__name__}.",
                        exit_code=EXIT_PRECONDITION)
    return data


def _dump(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


def write_overrides_template(path: Path, fields: list[str]) -> bool:
    """Write `fields` set to "" for the user to fill; an existing file is theirs and is never touched.
    Returns whether a file was written."""
    path = Path(path)
    if path.exists():
        return False
    write_atomically(path, _dump(dict.fromkeys(fields, "")))
    return True


def write_system_json(path: Path, data: Mapping[str, Any]) -> Path:
    return write_atomically(Path(path), _dump(data))


def require_complete(data: Mapping[str, Any], rules: RulesRound, overrides_path: Path) -> None:
    """UserError naming every empty or invalid field and the overrides file where the user sets it."""
    problems = [f"{name} is empty" for name in empty_fields(data, rules)]
    status = data.get("status")
    if not _is_empty(status) and status not in STATUSES:
        problems.append(f"status is '{status}' (expected one of {', '.join(STATUSES)})")
    if not problems:
        return
    raise UserError(f"The system description is incomplete ({len(problems)} fields): " + "; ".join(problems)
                    + f". Set them in {overrides_path} (a JSON object, field -> value; write \"N/A\" where a "
                    "field does not apply) and run again.", exit_code=EXIT_PRECONDITION)
