"""`systems/<system>.json`: filled from detection where it can be, from the user's overrides file elsewhere.

Every value is a string, as in published submissions. The round's checkers (main.py and submission_checker_old.py)
require all of `rules.system_json_fields` to be present, and a truthy value (`not value` fails: "", 0, false, [])
only for `rules.system_json_meaningful_fields`; the others (hw_notes, accelerator_frequency, ...) may stay "". So a
CPU-only system says `"accelerators_per_node": "0"`, never 0. What detection cannot know (status, cooling, memory
configuration, networking, notes...) stays "" until the user fills it in `systems/<system>.overrides.json`;
`require_complete` refuses to go on while a meaningful field is empty or any value is one the checkers reject or
crash on: a system_type other than their exact spellings, a status or division they do not know, counts that are
not whole numbers, an `is_network` key.
"""
from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..constants import SystemType
from ..errors import EXIT_FAILURE, UserError
from ..fileio import write_atomically
from ..paths import REPO_ROOT
from ..rules import RulesRound, get_round
from ..systems.info import SystemInfo
from ..user_files import read_json_file

STATUSES = ("available", "preview", "rdi")     # the checkers compare status.lower(); the toolkit writes lowercase
DIVISIONS = ("closed", "open", "network")      # submission_checker_old.py compares the division exactly
NOT_APPLICABLE = "N/A"
# main.py's CSV writer computes int(number_of_nodes) * int(accelerators_per_node) and crashes on "N/A" or "2.0".
COUNT_FIELDS = ("number_of_nodes", "accelerators_per_node")
# submission_checker_old.py's CSV writer concatenates these with strings: anything but a string crashes it.
TEXT_FIELDS = ("system_name", "host_processor_model_name", "accelerator_model_name", "system_type")
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
    """Python and the installed packages of the stack that matter for the results, as installed (the bootstrap
    installs exactly the hash-locked requirements/*.txt), and the lock they came from."""
    from ..environment_lock import lock_state

    found = {"Python": platform.python_version()}
    for dist, label in SOFTWARE_PACKAGES:
        try:
            found[label] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    lock = lock_state(Path(sys.prefix))
    found["environment"] = lock.short + (" (with packages that differ from it)" if lock.differences else "")
    return found


def framework(records, local: str) -> str:
    """The framework line of the system description: the serving engines (and versions) that answered the
    performance runs where they ran on servers that say so (the openai harness's `serving_engine`), else `local`,
    the framework of this environment."""
    engines = sorted({f"{e.extras['serving_engine']} {e.extras.get('serving_engine_version') or ''}".strip()
                      for record in records for e in record.endpoints if e.extras.get("serving_engine")})
    in_process = any(not record.endpoints for record in records)
    return ", ".join(([local] if in_process or not engines else []) + engines)


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


def _as_value(name: str, value: Any) -> Any:
    """Numbers become strings (0 must read "0"), status is written lowercase; other values are kept as written."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if name == "status" and isinstance(value, str):
        return value.strip().lower()
    return value


def _shown(value: Any) -> str:
    """A value as it reads in a JSON file: "Edge", false, [], 2.0."""
    return json.dumps(value, ensure_ascii=False)


def _choices(values) -> str:
    quoted = [f'"{v}"' for v in values]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def _value_problem(name: str, value: Any, rules: RulesRound) -> str | None:
    """Why the checkers would reject (or crash on) this non-empty value of `name`, and what to write instead;
    None when it is fine. Context (the folder's division and submitter) is checked by the callers."""
    if name == "is_network":
        return ("leave is_network out: it belongs to the network division, which the toolkit does not submit, "
                "and the checkers misread any value of it (a JSON boolean crashes them, \"false\" makes them "
                "require the network-division fields)")
    if isinstance(value, bool):
        if name in rules.system_json_meaningful_fields:
            return ("write the real value as a string instead of a JSON boolean (the checkers read false as not "
                    "filled in)")
        return None
    if name in rules.system_json_meaningful_fields and isinstance(value, (list, dict)) and not value:
        return "write the value as a string (the checkers read an empty list or object as not filled in)"
    if name == "system_type":
        if SystemType.from_json(value) is None:
            return (f"the checkers accept exactly {_choices(SystemType.json_spellings())} (lowercase, no spaces); "
                    "any other spelling makes them reject the results or crash")
        return None
    if name in TEXT_FIELDS and isinstance(value, (list, dict)):
        return "write it as one string (the checker's summary writer crashes on a list or object there)"
    if name == "status":
        if not isinstance(value, str) or value.strip().lower() not in STATUSES:
            return f"expected {_choices(STATUSES)}"
        return None
    if name == "division":
        if value not in DIVISIONS:
            return f"expected exactly {_choices(DIVISIONS)} (lowercase, as the division folder is named)"
        return None
    if name == "submitter" and not isinstance(value, str):
        return "write the organisation name as a string"
    if name in COUNT_FIELDS:
        smallest = 1 if name == "number_of_nodes" else 0
        try:
            count = int(_as_value(name, value))
        except (TypeError, ValueError):
            count = None
        if count is None or count < smallest:
            what = 'a whole number of at least 1 as a string, e.g. "1"' if smallest else \
                'a whole number as a string, e.g. "8", or "0" on a CPU-only system'
            return (f"write {what} (the checker multiplies int(number_of_nodes) by int(accelerators_per_node) and "
                    "crashes on anything else)")
    return None


def override_problems(overrides: Mapping[str, Any], where: Path | str, rules: RulesRound, *,
                      division: str | None = None, submitter: str | None = None) -> list[str]:
    """One sentence per value of the overrides file the checkers would reject or crash on. `division` and
    `submitter`, when given, are what the submission folder is named: the file must agree with them."""
    problems = []
    for name, value in overrides.items():
        if _is_empty(value):
            continue   # not filled in yet
        why = _value_problem(name, value, rules)
        if why is None and name == "division" and division is not None and value != division:
            why = (f"the runs being described are {division}-division runs, so remove division from the file "
                   "(the toolkit takes it from the runs)")
        if why is None and name == "submitter" and submitter and value != submitter:
            why = (f"the submission folder is named after SUBMITTER={submitter}, so remove submitter from the file "
                   f"or set it to \"{submitter}\"")
        if why is not None:
            problems.append(f"{name} is {_shown(value)} in {where}; {why}.")
    return problems


def describe_system(info: SystemInfo, system_id: str, division: str, submitter: str, system_type: str,
                    framework: str, overrides: Mapping[str, Any], rules: RulesRound, *,
                    software: Mapping[str, str] | None = None,
                    storage: tuple[str, str] | None = None,
                    overrides_path: Path | str | None = None) -> dict[str, Any]:
    """Every field of `rules.system_json_fields`, detected where possible; non-empty overrides win.

    `software` (name -> version) and `storage` ((capacity, type)) default to detection on this machine
    (storage: the disk holding the repo). `overrides_path` names the overrides file in messages (default
    systems/<system_id>.overrides.json); a value there the checkers would reject is a UserError.
    `host_processor_core_count` is cores per processor, as in NVIDIA's published systems (2x Xeon 8480C:
    processors_per_node "2", core_count "56").
    """
    if division not in DIVISIONS:
        raise UserError(f"Unknown division '{division}'; expected one of {', '.join(DIVISIONS)}.")
    if SystemType.from_json(system_type) is None:
        raise UserError(f"Unknown system type '{system_type}'; expected exactly one of "
                        f"{', '.join(SystemType.json_spellings())}.")
    where = overrides_path if overrides_path is not None else f"systems/{system_id}.overrides.json"
    problems = override_problems(overrides, where, rules, division=division, submitter=submitter)
    if problems:
        raise UserError(" ".join(problems), exit_code=EXIT_FAILURE)
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
            data[key] = _as_value(key, value)
    return data


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def empty_fields(data: Mapping[str, Any], rules: RulesRound) -> list[str]:
    """Required fields that are missing, None or blank: the meaningful ones first, then the optional ones, each in
    the rules' order. The overrides template lists all of them."""
    return empty_meaningful_fields(data, rules) + empty_optional_fields(data, rules)


def empty_meaningful_fields(data: Mapping[str, Any], rules: RulesRound) -> list[str]:
    """Fields the checkers require a truthy value for that are missing or not filled in (blank, 0, false, [])."""
    meaningful = set(rules.system_json_meaningful_fields)
    return [name for name in rules.system_json_fields
            if name in meaningful and (_is_empty(data.get(name)) or not data.get(name))]


def empty_optional_fields(data: Mapping[str, Any], rules: RulesRound) -> list[str]:
    """Fields the checkers require to be present but accept empty (hw_notes, accelerator_frequency, ...)."""
    meaningful = set(rules.system_json_meaningful_fields)
    return [name for name in rules.system_json_fields if name not in meaningful and _is_empty(data.get(name))]


def load_overrides(path: Path, rules: RulesRound | None = None, shown: Path | str | None = None) -> dict[str, Any]:
    """The user's values for `systems/<id>.overrides.json`; {} when there is no such file. A value the round's
    checkers would reject or crash on (see `override_problems`) is a UserError naming the field and the file
    (as `shown`, e.g. relative to the repository; default `path`)."""
    path = Path(path)
    shown = path if shown is None else shown
    if not path.exists():
        return {}
    data = read_json_file(path, "fix it (a JSON object, field -> value, in UTF-8) and run make generate_conf_files "
                                "again", shown)
    if not isinstance(data, dict):
        raise UserError(f"{shown} must hold one JSON object (field -> value), not {type(data).__name__}.",
                        exit_code=EXIT_FAILURE)
    problems = override_problems(data, shown, rules or get_round())
    if problems:
        raise UserError(" ".join(problems), exit_code=EXIT_FAILURE)
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
    """UserError naming every field the checkers would reject and the overrides file where the user sets it:
    a missing field, an empty meaningful field, a value they reject or crash on. Empty optional fields pass
    (the checkers accept them); `empty_optional_fields` lists them for a note."""
    problems = [f"{name} is missing" for name in rules.system_json_fields if name not in data]
    for name in empty_meaningful_fields(data, rules):
        if name not in data:
            continue
        value = data[name]
        problems.append(f"{name} is empty" if _is_empty(value) else
                        f"{name} is {_shown(value)}, which the checkers read as not filled in")
    for name, value in data.items():
        if _is_empty(value) or (name in rules.system_json_meaningful_fields and not value):
            continue
        why = _value_problem(name, value, rules)
        if why is not None:
            problems.append(f"{name} is {_shown(value)} ({why})")
    if not problems:
        return
    raise UserError(f"The system description is incomplete ({len(problems)} fields): " + "; ".join(problems)
                    + f". Set them in {overrides_path} (a JSON object, field -> value; write \"N/A\" where a "
                    "field does not apply) and run again.", exit_code=EXIT_FAILURE)


def declared_system_type(path: Path, overrides_path: Path | str) -> SystemType | None:
    """The system type `systems/<id>.json` declares, by the checkers' exact spellings; None when the file or the
    value is absent. A spelling the checkers reject is a UserError naming the file and where to fix it."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path} cannot be read as JSON ({error}); run make generate_conf_files again.",
                        exit_code=EXIT_FAILURE) from None
    declared = data.get("system_type") if isinstance(data, dict) else None
    if _is_empty(declared):
        return None
    found = SystemType.from_json(declared)
    if found is None:
        raise UserError(f"system_type is {_shown(declared)} in {path}; the checkers accept exactly "
                        f"{_choices(SystemType.json_spellings())} (lowercase, no spaces), so set it in "
                        f"{overrides_path} and run make generate_conf_files again.", exit_code=EXIT_FAILURE)
    return found


def _benchmark_rules(rules: RulesRound, name: str):
    """The rules table of a benchmark named by its submission name (resnet, bert-99) or toolkit name (resnet50)."""
    for key, bench in rules.benchmarks.items():
        if name == key or name in bench.submission_names.values():
            return bench
    return None


def benchmark_not_in_suite_message(submission_name: str, system_type: SystemType | str, system_id: str,
                                   rules: RulesRound | None = None) -> str:
    """One sentence for a benchmark the round has no scenario list for on this system type (resnet, bert and yolo
    are edge-only in v6.1): which system types have it and how to declare one, or to leave the benchmark out.
    The checkers reject such a result (submission_checker_old.py) or crash on it (main.py, closed division)."""
    rules = rules or get_round()
    declared = system_type if isinstance(system_type, SystemType) else SystemType.from_json(system_type)
    type_text = declared.value if declared is not None else str(system_type)
    where = f"systems/{system_id}.overrides.json"
    bench = _benchmark_rules(rules, submission_name)
    allowed = [t for t in SystemType if bench is not None and bench.allows(t)]
    if not allowed:
        return (f"The toolkit's {rules.version} rules tables do not describe {submission_name}, so it cannot tell "
                f"whether the round has it for {type_text} systems; check the round's suite tables and the "
                f"system_type in {where}, or leave {submission_name} out.")
    common = set.intersection(*(set(bench.required_scenarios[t]) for t in allowed))
    options = []
    for t in allowed:
        extra = [s.value for s in bench.required_scenarios[t] if s not in common]
        options.append(f'"{t.value}"' + (f" (which also requires {' and '.join(extra)})" if extra else ""))
    if declared is SystemType.datacenter:
        kind = "an edge system"
    elif declared is SystemType.edge:
        kind = "a datacenter system"
    else:
        kind = f"{'an' if allowed[0].value.startswith('e') else 'a'} {allowed[0].value} system"
    listed = " and ".join(t.value for t in allowed)
    return (f"{submission_name} is not in the {rules.version} {type_text} suite (the round has it for {listed} "
            f"systems only); set system_type to {' or '.join(options)} in {where} if this system is submitted as "
            f"{kind}, or leave {submission_name} out.")
