"""Multi-Instance GPU partitions through `nvidia-smi`: MIG_CONF=N instances on every GPU that supports MIG
(make configure_mig), none again (make teardown_mig), and the devices a container gets for MIG_CONF."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable

from ..common.errors import EXIT_FAILURE, UserError

ALL, OFF = "ALL", "OFF"
# `nvidia-smi mig -lgip`: "|   0  MIG 1g.18gb       19     7/7        16.00      No     16     1     0   |"
_PROFILE = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)")
# `nvidia-smi -L`: "  MIG 1g.18gb     Device  0: (UUID: MIG-0b6c...)"
_MIG_DEVICE = re.compile(r"^\s+MIG\s.*\(UUID:\s*(MIG-[^)\s]+)\)")


@dataclass(frozen=True)
class Profile:
    gpu: int
    name: str        # 1g.18gb
    id: int
    total: int       # instances of this profile that fit on one GPU
    memory_gib: float


def parse_mig_conf(value: str | None) -> str | None:
    """MIG_CONF as given: a positive number of instances per GPU, ALL (every MIG device), OFF or unset (none)."""
    if not value or value.upper() == OFF:
        return None
    if value.upper() == ALL:
        return ALL
    if value.isdigit() and int(value) > 0:
        return str(int(value))
    raise UserError(f"MIG_CONF={value!r} is not valid: give a number of instances per GPU (MIG_CONF=2), ALL or OFF.")


def _nvidia_smi(*arguments: str) -> str:
    if shutil.which("nvidia-smi") is None:
        raise UserError("nvidia-smi is not installed here, so this machine has no NVIDIA GPU to partition: MIG needs "
                        "an NVIDIA A100, A30, H100, H200, B200 or later with its driver.")
    done = subprocess.run(["nvidia-smi", *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"nvidia-smi {' '.join(arguments)} failed: {(done.stderr or done.stdout).strip()} "
                        f"(changing MIG modes needs root and no process on the GPU).", exit_code=EXIT_FAILURE)
    return done.stdout


def mig_gpus(smi: Callable[..., str] = _nvidia_smi) -> dict[int, str]:
    """GPU index -> its MIG mode now (Enabled/Disabled) for every GPU that supports MIG; a clear error where none
    does."""
    modes = {}
    for line in smi("--query-gpu=index,mig.mode.current", "--format=csv,noheader").splitlines():
        index, _, mode = (part.strip() for part in line.partition(","))
        if index.isdigit() and mode in ("Enabled", "Disabled"):
            modes[int(index)] = mode
    if not modes:
        raise UserError("No GPU of this machine supports MIG (nvidia-smi reports its MIG mode as N/A): run without "
                        "MIG_CONF, or on an NVIDIA A100, A30, H100, H200, B200 or later.")
    return modes


def profiles(gpu: int, smi: Callable[..., str] = _nvidia_smi) -> list[Profile]:
    found = []
    for line in smi("mig", "-i", str(gpu), "-lgip").splitlines():
        match = _PROFILE.match(line)
        if match and "+me" not in match.group(2):     # media-extension profiles are variants of the plain ones
            found.append(Profile(int(match.group(1)), match.group(2), int(match.group(3)), int(match.group(5)),
                                 float(match.group(6))))
    return found


def profile_for(count: int, available: list[Profile]) -> Profile:
    """The largest profile of which `count` instances fit on one GPU."""
    fitting = [p for p in available if p.total >= count]
    if not fitting:
        most = max((p.total for p in available), default=0)
        raise UserError(f"MIG_CONF={count}: this GPU holds at most {most} instances; give MIG_CONF={most} or less.")
    return max(fitting, key=lambda p: (p.memory_gib, -p.total))


def configure(count: int, log: Callable[[str], None], smi: Callable[..., str] = _nvidia_smi) -> None:
    """MIG on, then `count` equal GPU instances with one compute instance each, on every GPU that supports MIG."""
    for gpu, mode in mig_gpus(smi).items():
        if mode != "Enabled":
            smi("-i", str(gpu), "-mig", "1")
        chosen = profile_for(count, profiles(gpu, smi))
        smi("mig", "-i", str(gpu), "-cgi", ",".join([str(chosen.id)] * count), "-C")
        log(f"GPU {gpu}: {count} x MIG {chosen.name} (profile {chosen.id}) created.")
    log(f"Next: make launch_docker MIG_CONF={count}; make teardown_mig removes them.")


def teardown(log: Callable[[str], None], smi: Callable[..., str] = _nvidia_smi) -> None:
    """Every compute and GPU instance removed and MIG off, on every GPU where it is on."""
    enabled = [gpu for gpu, mode in mig_gpus(smi).items() if mode == "Enabled"]
    for gpu in enabled:
        smi("mig", "-i", str(gpu), "-dci")
        smi("mig", "-i", str(gpu), "-dgi")
        smi("-i", str(gpu), "-mig", "0")
        log(f"GPU {gpu}: MIG instances removed, MIG off.")
    if not enabled:
        log("MIG is off on every GPU already: nothing to remove.")


def run_flags(mig_conf: str | None, smi: Callable[..., str] = _nvidia_smi) -> list[str]:
    """The `docker run` flags that give the container the MIG devices of MIG_CONF (nothing when it is unset)."""
    if mig_conf is None:
        return []
    if mig_conf == ALL:
        return ["--gpus", "all", "-e", "NVIDIA_MIG_CONFIG_DEVICES=all"]
    gpus = mig_gpus(smi)
    devices = [m.group(1) for m in map(_MIG_DEVICE.match, smi("-L").splitlines()) if m]
    wanted = int(mig_conf) * len(gpus)
    if len(devices) != wanted:
        raise UserError(f"MIG_CONF={mig_conf} means {wanted} MIG instance(s) on {len(gpus)} GPU(s), and nvidia-smi "
                        f"lists {len(devices)}: run make configure_mig MIG_CONF={mig_conf} first (make teardown_mig "
                        f"removes other partitions).")
    return ["--gpus", f'"device={",".join(devices)}"']
