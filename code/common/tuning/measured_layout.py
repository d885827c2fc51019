"""Untuned layouts chosen by measurement: where no layout was tuned on this system (make tune writes into custom.py)
and none was typed, an engine whose batch size and threads are free to move (ONNX Runtime: tuning/layouts.py's
THREADED_BACKENDS) runs the layout a sweep of a few seconds on the engine itself found best, instead of the shipped
config's. The sweep is kept beside the engine (paths.layout_sweep) and taken as long as the engine's manifest and
the machine are the ones it was measured on; it is measured once (code/actions/layout_sweep.py makes it), and again
once the machine is quiet where it was measured on a busy one.

- Offline: the batch size of the most samples/s at the configured instances and threads (OFFLINE_BATCHES on every
  instance). Measuring starts once the machine runs as it will in a run: a machine that has idled runs faster for
  its first seconds of load (a VM's CPU credit, a CPU's boost), so the engine first runs STEADY_SECONDS unmeasured;
  on a 2-core VM a sweep without it read the candidates in falling order of their turn (b1 407 samples/s first,
  b64 121 last) and chose batch 1, which 3 s loops then put below batches 2 to 16. Then the batch sizes are
  measured in turns for TURNS_SECONDS: in each turn every size serves the same samples (one batch of the largest),
  every other turn in reverse order, and each size's figure is its samples over its time in all turns
  (bench_raw.throughput_in_turns). The same VM's speed moves between two levels a second at a time (one sample
  took 5.1 or 8.5 ms); there, a window of its own for each size (two passes of 0.5 s) chose b2, b4, b4, b8, b16
  and b16 in six sweeps in a row, where 90 s in turns read b1 159, b2 174, b4 187, b8 192, b16 197, b32 197 and
  b64 199 samples/s; six sweeps in turns chose b16, b8, b16, b16, b32 and b8. Within TIE of the best the smaller
  batch wins: noise decides nothing, and a smaller batch holds less.
  A model of one sample per call (yolo) has no batch to choose: its instances x threads layouts are measured at
  batch 1 instead, and the one of the most samples/s wins.
- Server (a largest batch of one: its window is then no knob, as make tune has it): the instances x threads
  layouts that use every core once, each measured at batch 1 on all its instances at once. At rates where one
  sample at a time keeps up (the rate at most KEEPS_UP of a layout's batch-1 throughput, so that a sample seldom
  finds another in the way) the fewest instances that keep up: one instance with every thread, whose sample takes
  the least time. More instances only where the rate needs them; past every layout's margin, the layout of the
  most throughput.

The chosen values replace the shipped config's in the resolved config with a source that says how they were chosen
("default (untuned: batch 2 from a 6 s sweep ...)"): still a default, so a command that repeats the run does not
pin them, and show_config and metadata.json name it. A value typed or set in custom.py always wins.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Collection, Iterable, Mapping

from ..config_registry import UNTUNED, ResolvedConfig
from ..constants import Scenario
from ..fileio import sha256_file, write_atomically
from .layouts import OFFLINE_BATCHES, THREADED_BACKENDS

SWEEP_SECONDS = 0.5          # a layout's loop in one pass
PASSES = 2                   # passes over the layouts, in turns, the second in reverse; each layout's mean kept
TURNS_SECONDS = 10.0         # the batch sizes' turns of the same samples each (two turns at least)
STEADY_SECONDS = 2.0         # the engine run unmeasured first, until the machine runs at its loaded speed
TIE = 0.01                   # a smaller batch (fewer instances) within 1 % of the best samples/s wins
# Server: a layout keeps up while the rate is at most this share of its batch-1 samples/s. One server's p99 is about
# 2.9 x its service time there (M/D/1), 4.4 x at 0.5; near 0.5 of its throughput one INT8 instance of 2 threads
# measured INVALID on 2 cores while 2 x 1 thread held (documentation/harness.md, "Untuned layouts").
KEEPS_UP = 0.3
# The fields a sweep sets: the batch size (Offline), or the instances x threads (Server; Offline for a model of one
# sample per call). Any of them typed or set in custom.py, and the sweep sets none.
BATCH, LAYOUT = "batch", "layout"     # what a sweep varies
SWEPT_FIELDS = MappingProxyType({BATCH: ("batch_size",), LAYOUT: ("instances", "intra_op_threads")})
SCENARIOS = (Scenario.Offline, Scenario.Server)
# The fields that say which engine a sweep measured (its manifest's sha256 says whether it is still that engine).
ENGINE_FIELDS = ("model", "backend", "precision", "input_dtype")
MAKE_TUNE_CONFIRMS = "make tune confirms"
# The fields held while a sweep measures (a sweep at other threads or another batch says nothing of these).
HELD = MappingProxyType({BATCH: ("instances", "intra_op_threads", "intra_op_spinning", "inter_op_threads"),
                         LAYOUT: ("batch_size", "intra_op_spinning", "inter_op_threads")})


def machine_key(cpu_model: str, cores: int) -> str:
    """What a sweep was measured on: the CPU, its cores and the machine's name (a clone copied to another machine
    of the same CPU measures again)."""
    return f"{cpu_model}, {cores} cores, {platform.node()}"


@dataclass(frozen=True)
class Sweep:
    """One sweep of one engine: samples/s per candidate, keyed by its label ("b2"; Server: "1x2", instances x
    threads, at batch 1)."""

    scenario: str
    engine: str                       # the engine file's name, in its folder
    manifest_sha256: str
    machine: str
    fields: Mapping[str, Any]         # ENGINE_FIELDS, and for Offline the OFFLINE_HELD values it ran with
    rates: Mapping[str, float]
    seconds: float                    # how long the loops took in all
    measured: str                     # when (ISO 8601)
    load: float | None = None         # the machine's 1-minute load average when measured (os.getloadavg)
    cores: int = 0                    # its cores

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)} | \
            {"fields": dict(self.fields), "rates": dict(self.rates)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Sweep":
        return cls(str(data["scenario"]), str(data["engine"]), str(data["manifest_sha256"]), str(data["machine"]),
                   MappingProxyType(dict(data["fields"])),
                   MappingProxyType({str(k): float(v) for k, v in dict(data["rates"]).items()}),
                   float(data["seconds"]), str(data["measured"]),
                   float(data["load"]) if data.get("load") is not None else None, int(data.get("cores") or 0))


def measured_now() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def busy(load: float | None, cores: int) -> bool:
    """Whether a machine at `load` (1-minute load average) had more runnable work than `cores`."""
    return load is not None and cores > 0 and load > cores


def quieter_now(kept: Sweep | None, load: float | None) -> bool:
    """Whether `kept` was measured on a busy machine that is quiet at `load` now: it is then measured again."""
    return kept is not None and busy(kept.load, kept.cores) and not busy(load, kept.cores) and load is not None


def load_now() -> float | None:
    try:
        return round(os.getloadavg()[0], 1)
    except OSError:
        return None


def varies(scenario: Scenario, max_batch: int | None) -> str:
    """What a sweep of `scenario` varies: Offline the batch size, unless the model takes one sample per call
    (`max_batch` 1), whose Offline throughput comes from instances; Server the instances x threads."""
    return BATCH if scenario is Scenario.Offline and max_batch != 1 else LAYOUT


def sweep_fields(config: ResolvedConfig, kind: str) -> dict[str, Any]:
    """What a sweep of `config`'s engine that varies `kind` must agree on to apply: its engine fields and the
    fields it held (Server: none, at batch 1)."""
    held = HELD[kind] if config.scenario is Scenario.Offline else ()
    return {name: config.get(name) for name in ENGINE_FIELDS + held}


def kind_of(labels: Iterable[str]) -> str:
    """What a sweep of these candidates (its rates' labels) varied."""
    return BATCH if all(label.startswith("b") for label in labels) else LAYOUT


def applies(config: ResolvedConfig) -> bool:
    """Whether `config`'s layout can be chosen by a sweep: a benchmark of fixed-size batches (not one that
    generates: its harness batches requests continuously), a threaded backend (batch and threads free to move, one
    engine for every batch size), Offline, or Server at a largest batch of one."""
    from ..benchmark_api import get_benchmark

    if config.get("backend") not in THREADED_BACKENDS or config.scenario not in SCENARIOS:
        return False
    if get_benchmark(config.benchmark).generates_tokens:
        return False
    return config.scenario is Scenario.Offline or int(config["batch_size"]) == 1


def read_sweeps(path: Path) -> list[Sweep]:
    """The sweeps kept in `path`; none when it is absent or does not read (it is then measured again)."""
    try:
        return [Sweep.from_dict(entry) for entry in json.loads(Path(path).read_text())["sweeps"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def keep_sweep(path: Path, sweep: Sweep) -> Path:
    """`sweep` written into `path`, replacing the one of the same engine file, fields and scenario."""
    others = [s for s in read_sweeps(path)
              if (s.engine, dict(s.fields), s.scenario) != (sweep.engine, dict(sweep.fields), sweep.scenario)]
    body = {"sweeps": [s.to_dict() for s in (*others, sweep)]}
    return write_atomically(Path(path), json.dumps(body, indent=1) + "\n")


def find_sweep(path: Path, config: ResolvedConfig, machine: str) -> Sweep | None:
    """The newest sweep in `path` of `config`'s engine (same fields; its manifest, beside the engine, unchanged) on
    this machine; None when there is none."""
    for sweep in reversed(read_sweeps(path)):
        if sweep.scenario != config.scenario.value or sweep.machine != machine \
                or dict(sweep.fields) != sweep_fields(config, kind_of(sweep.rates)):
            continue
        manifest = Path(path).parent / f"{sweep.engine}.manifest.json"
        try:
            if sha256_file(manifest) == sweep.manifest_sha256:
                return sweep
        except OSError:
            continue
    return None


# -- the choices (pure) --------------------------------------------------------------------------------------------
def batch_label(batch: int) -> str:
    return f"b{batch}"


def layout_label(instances: int, threads: int) -> str:
    return f"{instances}x{threads}"


def parse_layout(label: str) -> tuple[int, int]:
    instances, _, threads = label.partition("x")
    return int(instances), int(threads)


def choose_batch(rates: Mapping[int, float]) -> int:
    """The batch size of the most samples/s; the smallest within TIE of it."""
    if not rates:
        raise ValueError("no batch size was measured")
    best = max(rates.values())
    return min(b for b, rate in rates.items() if rate >= best * (1 - TIE))


def most_throughput(rates: Mapping[tuple[int, int], float]) -> tuple[int, int]:
    """The (instances, threads) of the most samples/s; the fewest instances within TIE of it (one copy of the
    weights fewer for noise)."""
    if not rates:
        raise ValueError("no layout was measured")
    best = max(rates.values())
    return min((layout for layout, rate in rates.items() if rate >= best * (1 - TIE)), key=lambda each: each[0])


def choose_layout(rates: Mapping[tuple[int, int], float], rate: float) -> tuple[tuple[int, int], str]:
    """((instances, threads), why) for Server arrivals at `rate` per second, from each layout's batch-1 samples/s:
    the fewest instances that keep up (rate <= KEEPS_UP x their samples/s), else the most samples/s."""
    if not rates:
        raise ValueError("no layout was measured")
    keeping = sorted((layout for layout, done in rates.items() if rate <= KEEPS_UP * done),
                     key=lambda layout: (layout[0], -rates[layout]))
    if keeping:
        layout = keeping[0]
        return layout, (f"{rate:g} QPS is {rate / rates[layout]:.0%} of its {rates[layout]:,.0f} samples/s at "
                        f"batch 1: one sample at a time keeps up" if layout[0] == 1 else
                        f"{rate:g} QPS needs {layout[0]} instances to stay within {KEEPS_UP:.0%} of their "
                        f"samples/s at batch 1 ({rates[layout]:,.0f})")
    layout = most_throughput(rates)
    return layout, (f"{rate:g} QPS is above {KEEPS_UP:.0%} of every layout's samples/s at batch 1: the layout of the "
                    f"most ({rates[layout]:,.0f})")


def _rates_text(rates: Mapping[str, float]) -> str:
    return ", ".join(f"{label} {rate:,.0f}" for label, rate in rates.items())


def chosen(config: ResolvedConfig, sweep: Sweep) -> tuple[dict[str, Any], str]:
    """(the fields the sweep sets for `config`, why, in words) from `sweep`."""
    took = f"a {sweep.seconds:.0f} s sweep of this engine ({_rates_text(sweep.rates)} samples/s)"
    if busy(sweep.load, sweep.cores):
        took += (f", measured while the machine was busy (load {sweep.load:g} on {sweep.cores} cores: measured again "
                 f"once it is quiet)")
    if kind_of(sweep.rates) == BATCH:
        batches = {int(label[1:]): rate for label, rate in sweep.rates.items()}
        batch = choose_batch(batches)
        return {"batch_size": batch}, f"batch {batch} from {took}; {MAKE_TUNE_CONFIRMS}"
    layouts = {parse_layout(label): rate for label, rate in sweep.rates.items()}
    if config.scenario is Scenario.Offline:
        (instances, threads), why = most_throughput(layouts), "the most samples/s"
    else:
        (instances, threads), why = choose_layout(layouts, float(config["server_target_qps"]))
    values: dict[str, Any] = {"instances": instances, "intra_op_threads": threads}
    return values, (f"{instances} x {threads} thread{'s' if threads > 1 else ''} at batch "
                    f"{config['batch_size']} from {took}: {why}; {MAKE_TUNE_CONFIRMS}")


def apply_sweep(config: ResolvedConfig, sweep: Sweep | None, pinned: Collection[str]) -> ResolvedConfig:
    """`config` with the layout `sweep` chooses, where none of the fields it sets is `pinned` (typed, or set in
    custom.py, make tune's included); the source of each says how it was chosen."""
    if sweep is None or not applies(config):
        return config
    if any(name in pinned for name in SWEPT_FIELDS[kind_of(sweep.rates)]):
        return config
    values, why = chosen(config, sweep)
    source = f"{UNTUNED}{why})"
    return dataclasses.replace(config, values=MappingProxyType({**config.values, **values}),
                               sources=MappingProxyType({**config.sources, **{name: source for name in values}}))
