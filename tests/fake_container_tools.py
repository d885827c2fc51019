"""Recording stand-ins for `docker` and `nvidia-smi`, put first on PATH by the container workflow's tests: each
call is appended to calls.jsonl (its arguments, and what it was handed: the Dockerfile on stdin, the staged CA
bundle at build time), and answers from a small state file as the real tool would."""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

DOCKER = r'''
import json, os, sys, time
from pathlib import Path
home = Path(os.environ["FAKE_TOOLS_HOME"])
state_file = home / "docker-state.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"images": {}}
args = sys.argv[1:]
call = {"tool": "docker", "args": args}
status = 0
if args[:1] == ["info"]:
    if os.environ.get("FAKE_DOCKER_ENGINE") == "none":
        print("Cannot connect to the Docker daemon", file=sys.stderr)
        status = 1
    else:
        print("20.10.24")
elif args[:2] == ["buildx", "version"]:
    status = 0 if os.environ.get("FAKE_DOCKER_BUILDX") == "1" else 1
elif args[:2] == ["image", "inspect"]:
    image = state["images"].get(args[-1])
    if image is None:
        status = 1
    else:
        print(image["user"] if "User" in args[-2] else image["created"])
elif args[:1] == ["build"]:
    tag = args[args.index("-t") + 1]
    built = dict(a.split("=", 1) for a in args[1:] if "=" in a and args[args.index(a) - 1] == "--build-arg")
    if args[-1] == "-" or args[args.index("-f") + 1:][:1] == ["-"]:
        call["stdin"] = sys.stdin.read()
    if args[-1] != "-":
        staged = Path(args[-1]) / "build" / "docker-ca" / "ca-bundle.crt"
        call["staged_ca"] = staged.read_text() if staged.exists() else None
    state["images"][tag] = {"created": time.strftime("%Y-%m-%dT%H:%M:%S.") + f"{time.time_ns() % 10**9:09d}Z",
                            "user": f"{built['USER_ID']}:{built['GROUP_ID']}" if "USER_ID" in built else ""}
elif args[:1] == ["run"]:
    status = int(os.environ.get("FAKE_RUN_STATUS", "0"))
with open(home / "calls.jsonl", "a") as log:
    log.write(json.dumps(call) + "\n")
state_file.write_text(json.dumps(state))
sys.exit(status)
'''

NVIDIA_SMI = r'''
import json, os, sys
from pathlib import Path
home = Path(os.environ["FAKE_TOOLS_HOME"])
state_file = home / "smi-state.json"
# kind: "gpu" (one H100 without MIG support reported) or "mig" (two H100s that support MIG)
state = json.loads(state_file.read_text()) if state_file.exists() else {"kind": "mig", "mig": {}, "instances": {}}
args = sys.argv[1:]
gpus = ["0"] if state["kind"] == "gpu" else ["0", "1"]
status = 0
if args == ["-L"]:
    for gpu in gpus:
        print(f"GPU {gpu}: NVIDIA H100 80GB HBM3 (UUID: GPU-{gpu}000)")
        for n in range(state["instances"].get(gpu, 0)):
            print(f"  MIG 3g.40gb     Device  {n}: (UUID: MIG-{gpu}-{n})")
elif args[:1] == ["--query-gpu=index,mig.mode.current"]:
    for gpu in gpus:
        mode = "[N/A]" if state["kind"] == "gpu" else ("Enabled" if state["mig"].get(gpu) else "Disabled")
        print(f"{gpu}, {mode}")
elif len(args) == 4 and args[0] == "-i" and args[2] == "-mig":
    state["mig"][args[1]] = args[3] == "1"
elif args[:1] == ["mig"] and "-lgip" in args:
    print("| GPU instance profiles:                                                      |")
    for line in ("|   0  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |",
                 "|   0  MIG 1g.10gb+me    20     1/1        9.75       No     16     1     0   |",
                 "|   0  MIG 2g.20gb       14     3/3        19.62      No     32     2     0   |",
                 "|   0  MIG 3g.40gb        9     2/2        39.50      No     60     3     0   |",
                 "|   0  MIG 7g.80gb        0     1/1        79.25      No     132    7     0   |"):
        print(line.replace("|   0", f"|   {args[args.index('-i') + 1]}"))
elif args[:1] == ["mig"] and "-cgi" in args:
    gpu = args[args.index("-i") + 1]
    state["instances"][gpu] = len(args[args.index("-cgi") + 1].split(","))
elif args[:1] == ["mig"] and "-dgi" in args:
    state["instances"][args[args.index("-i") + 1]] = 0
with open(home / "calls.jsonl", "a") as log:
    log.write(json.dumps({"tool": "nvidia-smi", "args": args}) + "\n")
state_file.write_text(json.dumps(state))
sys.exit(status)
'''


class FakeTools:
    """A folder with `docker` (and `nvidia-smi` when asked) to put first on PATH, and what they recorded."""

    def __init__(self, home: Path, nvidia_smi: str | None) -> None:
        self.home = home
        self.bin = home / "bin"
        self.bin.mkdir(parents=True)
        self._script("docker", DOCKER)
        if nvidia_smi is not None:
            self._script("nvidia-smi", NVIDIA_SMI)
            (home / "smi-state.json").write_text(json.dumps({"kind": nvidia_smi, "mig": {}, "instances": {}}))

    def _script(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def environment(self) -> dict[str, str]:
        """PATH with the fakes first, and no tool of the host that could answer in their place."""
        system = [p for p in os.environ["PATH"].split(os.pathsep) if p and not (Path(p) / "nvidia-smi").exists()]
        return {"PATH": os.pathsep.join([str(self.bin), *system]), "FAKE_TOOLS_HOME": str(self.home)}

    def calls(self, tool: str, first: str | None = None) -> list[dict]:
        log = self.home / "calls.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return [c for c in map(json.loads, lines) if c["tool"] == tool and (first is None or c["args"][:1] == [first])]
