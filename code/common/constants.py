"""Vocabulary shared by every layer: scenarios, test modes and the parts of a workload setting.

Each enum parses the spellings users type (case-insensitive, with or without separators) and
names its valid choices when it cannot.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import UserError

# The actions that run LoadGen tests for a submission, as make and --action name them: what a record's command repeats.
RUN_HARNESS_ACTION = "run_harness"
AUDIT_ACTION = "run_audit_harness"


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


class _Choice(str, enum.Enum):
    """A str enum whose members parse case-insensitively from their value or an alias."""

    @classmethod
    def aliases(cls) -> dict[str, str]:
        return {}

    @classmethod
    def parse(cls, text: str, what: str | None = None):
        key = _squash(text)
        for member in cls:
            if key in (_squash(member.value), _squash(member.name)):
                return member
        alias = cls.aliases().get(key)
        if alias is not None:
            return cls(alias)
        raise UserError(f"Unknown {what or cls.__name__} '{text}'. Valid choices: {cls.choices_text()}.")

    @classmethod
    def choices_text(cls) -> str:
        return ", ".join(m.value for m in cls)

    def __str__(self) -> str:
        return self.value


class Scenario(_Choice):
    """LoadGen scenarios, spelled as LoadGen and the submission tree spell them."""

    Offline = "Offline"
    Server = "Server"
    SingleStream = "SingleStream"
    MultiStream = "MultiStream"
    # The LLM benchmarks' second server scenario: LoadGen runs it as Server, under the model name
    # `<model>-interactive` (tighter TTFT/TPOT bounds in mlperf.conf); the submission tree has its own folder.
    Interactive = "Interactive"

    @property
    def loadgen(self) -> "Scenario":
        """The scenario LoadGen runs (and logs as effective_scenario): Server for Interactive, else itself."""
        return Scenario.Server if self is Scenario.Interactive else self

    @property
    def server_like(self) -> bool:
        """Queries arrive on LoadGen's Poisson schedule and a latency bound applies (Server, Interactive)."""
        return self.loadgen is Scenario.Server


class TestMode(_Choice):
    __test__ = False  # not a pytest test class

    PerformanceOnly = "PerformanceOnly"
    AccuracyOnly = "AccuracyOnly"

    @classmethod
    def aliases(cls) -> dict[str, str]:
        return {"performance": "PerformanceOnly", "accuracy": "AccuracyOnly"}


def test_label(benchmark: str, scenario: str, test_mode: str, audit_test: str | None = None) -> str:
    """How one LoadGen test is named in messages: `resnet50 Offline PerformanceOnly TEST01`."""
    return f"{benchmark} {scenario} {test_mode}" + (f" {audit_test}" if audit_test else "")


class AccuracyTarget(_Choice):
    """Fraction of the reference accuracy a run must reach; names follow NVIDIA's k_99 / k_99_9."""

    k_95 = "k_95"
    k_99 = "k_99"
    k_99_9 = "k_99_9"

    @property
    def fraction(self) -> float:
        return {"k_95": 0.95, "k_99": 0.99, "k_99_9": 0.999}[self.value]

    @property
    def percent_label(self) -> str:
        return {"k_95": "95", "k_99": "99", "k_99_9": "99.9"}[self.value]

    @classmethod
    def aliases(cls) -> dict[str, str]:
        return {"95": "k_95", "99": "k_99", "999": "k_99_9", "0.95": "k_95", "099": "k_99", "0999": "k_99_9"}


class PowerSetting(_Choice):
    MaxP = "MaxP"
    MaxQ = "MaxQ"


class HarnessType(str):
    """The name of a harness type (--harness_type): how the system under test is driven. `lwis`, the toolkit's
    in-process batching harness, is the default; every other is the type of a harness plug-in (the toolkit's Triton
    and openai harnesses, or one of the user's), so the names are open here: arguments.py checks a typed one against
    the harness registry. A name is lower-case letters, digits and '-' ('_' separates the parts of a workload
    setting's name: lwis_k_99_MaxP)."""

    __slots__ = ()

    def __new__(cls, name: str) -> "HarnessType":
        if not name or not all(ch.isascii() and (ch.isalnum() or ch == "-") for ch in name) or name != name.lower():
            raise UserError(f"'{name}' is not a harness type: a name is lower-case letters, digits and '-' (e.g. "
                            f"{LWIS}).")
        return super().__new__(cls, name)

    @classmethod
    def parse(cls, text: str, what: str | None = None) -> "HarnessType":
        """A harness type as typed (any case); whether a harness serves it is the harness registry's to say."""
        return cls(text.strip().lower())

    @property
    def value(self) -> str:
        """The name, as the other parts of a workload setting give theirs."""
        return str(self)


LWIS = "lwis"     # the default harness type


class SystemType(_Choice):
    """Submission categories of a system (systems/<system>.json `system_type`)."""

    edge = "edge"
    datacenter = "datacenter"
    datacenter_edge = "datacenter,edge"

    @classmethod
    def json_spellings(cls) -> dict[str, "SystemType"]:
        """The exact `system_type` values the round's checkers accept; any other spelling (`Edge`,
        `datacenter, edge`) is rejected by them, or crashes them."""
        return {"edge": cls.edge, "datacenter": cls.datacenter, "datacenter,edge": cls.datacenter_edge,
                "edge,datacenter": cls.datacenter_edge}

    @classmethod
    def from_json(cls, value: object) -> "SystemType | None":
        """The system type a systems JSON value names exactly, or None."""
        return cls.json_spellings().get(value) if isinstance(value, str) else None

    @property
    def includes_edge(self) -> bool:
        return self is not SystemType.datacenter


@dataclass(frozen=True, order=True)
class WorkloadSetting:
    """Harness type x accuracy target x power setting: the last part of a registry key."""

    harness_type: HarnessType = HarnessType(LWIS)
    accuracy_target: AccuracyTarget = AccuracyTarget.k_99
    power_setting: PowerSetting = PowerSetting.MaxP

    @property
    def name(self) -> str:
        return f"{self.harness_type.value}_{self.accuracy_target.value}_{self.power_setting.value}"

    @classmethod
    def from_name(cls, name: str) -> "WorkloadSetting":
        """Parse a full name such as `lwis_k_99_MaxP` (the form used in engine file names)."""
        harness, _, rest = name.partition("_")
        target, _, power = rest.rpartition("_")
        try:
            return cls(HarnessType.parse(harness), AccuracyTarget.parse(target), PowerSetting.parse(power))
        except UserError:
            raise UserError(
                f"Unknown workload setting '{name}'. Expected <harness type>_<accuracy target>_<power setting>, "
                f"for example lwis_k_99_MaxP (accuracy target: {AccuracyTarget.choices_text()}; power setting: "
                f"{PowerSetting.choices_text()})."
            ) from None

    def __str__(self) -> str:
        return self.name


# `--config_ver` short names, as in NVIDIA's code, mapped onto workload settings.
CONFIG_VERSIONS: dict[str, WorkloadSetting] = {
    "default": WorkloadSetting(),
    "high_accuracy": WorkloadSetting(accuracy_target=AccuracyTarget.k_99_9),
    "maxq": WorkloadSetting(power_setting=PowerSetting.MaxQ),
    "high_accuracy_maxq": WorkloadSetting(accuracy_target=AccuracyTarget.k_99_9, power_setting=PowerSetting.MaxQ),
}


def parse_config_ver(text: str) -> WorkloadSetting:
    key = text.strip().lower()
    if key in CONFIG_VERSIONS:
        return CONFIG_VERSIONS[key]
    if key.count("_") >= 2:
        return WorkloadSetting.from_name(text.strip())
    raise UserError(
        f"Unknown config_ver '{text}'. Valid choices: {', '.join(CONFIG_VERSIONS)}, "
        f"or a full workload setting such as lwis_k_99_MaxP."
    )
