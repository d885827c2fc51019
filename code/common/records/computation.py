"""What a run computes: two runs of the same computation give the same outputs, however fast.

A performance run and its accuracy run (and a compliance test and the runs it is compared with) must be of the same
computation: the same config fields of COMPUTATION_FIELDS, the same engine file and the same preprocessed data.
"""
from __future__ import annotations

from typing import Any, Mapping

from .record import RunRecord

# The generation knobs of an LLM, whose non-reference values make a run a development run.
GENERATION_CAPS = ("max_input_tokens", "max_output_tokens", "total_sample_count")
# Config fields that decide what a run computes: a performance run and its accuracy run (and a compliance test and
# the runs it is compared with) must agree on all of them. The model, the data set, the backend and precision choose
# the engine and the samples; an LLM's generation caps cut prompts or outputs, and total_sample_count the samples
# scored. Speed knobs (batch size, instances, threads, harness implementation, expected or target QPS, batch
# timeout, prefill batching) are left out: they change how fast the same outputs come, not what they are. Where a
# knob does go into the engine (a TensorRT plan's batch size, the calibration set of INT8), the engine's sha256
# tells the runs apart.
# Guided decoding constrains what the model may answer: a guided run and an unguided one are other computations.
COMPUTATION_FIELDS = ("model", "dataset", "backend", "precision", *GENERATION_CAPS, "use_guided_decoding")
# What a record written before a field was kept means by its absence (the field's default then).
ABSENT_MEANS = {"use_guided_decoding": False}


def differing_fields(have: Mapping[str, Any], want: Mapping[str, Any],
                     have_reference: Mapping[str, Any] | None = None,
                     want_reference: Mapping[str, Any] | None = None) -> list[str]:
    """The COMPUTATION_FIELDS whose values differ: empty when the two configs compute the same. `*_reference`: each
    config's benchmark defaults for its kind of run; a field at its reference value on both sides is the same
    computation although the values differ (gpt-oss-120b's accuracy run generates up to 32768 tokens, its
    performance run up to 10240, as the reference does)."""
    have_reference, want_reference = have_reference or {}, want_reference or {}

    def at_reference(name: str) -> bool:
        return name in have_reference and name in want_reference and \
            have.get(name) == have_reference[name] and want.get(name) == want_reference[name]

    def value(fields: Mapping[str, Any], name: str) -> Any:
        return fields.get(name, ABSENT_MEANS.get(name))

    return [name for name in COMPUTATION_FIELDS if value(have, name) != value(want, name) and not at_reference(name)]


def development_caps(fields: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """Why a closed-division run does not generate as the reference does, one sentence each (empty: it does):
    an output cap other than the benchmark's default for its kind of run (`reference`, the config's
    benchmark_defaults), or a prompt cap (the reference cuts no prompt)."""
    reasons = []
    cap, wanted = fields.get("max_output_tokens"), reference.get("max_output_tokens")
    if wanted is not None and cap != wanted:
        reasons.append(f"max_output_tokens={cap} where the reference generates up to {wanted} tokens in this kind "
                       f"of run: a development cap, which the closed division does not allow. Run it again without "
                       f"--max_output_tokens (the benchmark's default is the reference's).")
    if fields.get("max_input_tokens"):
        reasons.append(f"max_input_tokens={fields['max_input_tokens']} cuts the prompts, which the reference does "
                       f"not: a development cap, which the closed division does not allow. Run it again with "
                       f"--max_input_tokens=0.")
    return reasons


def engine_identity(record: RunRecord) -> str:
    """The engine file's sha256 as its manifest recorded it at the build; for an engine whose manifest records
    none, the manifest's own sha256 ("" without an engine part)."""
    engine = record.engine
    if engine is None:
        return ""
    return str(engine.manifest.get("engine_sha256") or f"manifest {engine.manifest_sha256}")


# What an endpoint's record says of the serving engine behind it (EndpointRecord.extras of the openai harness), and
# the digest of the model folder it served where the toolkit made that folder and recorded it.
SERVING_ENGINE, SERVING_ENGINE_VERSION, MODEL_FOLDER_SHA256 = ("serving_engine", "serving_engine_version",
                                                               "model_folder_sha256")


def serving_identity(record: RunRecord) -> frozenset[tuple[str, str, str, str]]:
    """What the servers of a run served, one (served model id, serving engine, its version, model folder digest)
    per distinct kind of server; empty for a run that sent no queries to a server. A serving engine has no engine
    file whose digest would tell its runs apart, so this does: two runs of different served models (or engines, or
    versions of one) compute different outputs."""
    return frozenset((endpoint.model, str(endpoint.extras.get(SERVING_ENGINE) or ""),
                      str(endpoint.extras.get(SERVING_ENGINE_VERSION) or ""),
                      str(endpoint.extras.get(MODEL_FOLDER_SHA256) or ""))
                     for endpoint in record.endpoints)


def _served(identity: frozenset[tuple[str, str, str, str]]) -> str:
    if not identity:
        return "no server"
    return ", ".join(sorted(f"{model or 'an unnamed model'} on {engine or 'an unknown engine'}"
                            f"{' ' + version if version else ''}{f' (model folder {digest[:12]})' if digest else ''}"
                            for model, engine, version, digest in identity))


def computation_differences(record: RunRecord, other: RunRecord) -> list[str]:
    """How `record` computes something else than `other`, one phrase each (empty: the same computation). The data
    is compared only where both records name it (records written before it was kept do not); the servers where
    either run sent its queries to one (serving_identity)."""
    mine, theirs = record.config.fields, other.config.fields
    differences = [f"{name}={mine.get(name)}, not {theirs.get(name)}"
                   for name in differing_fields(mine, theirs, record.config.benchmark_defaults,
                                                other.config.benchmark_defaults)]
    if engine_identity(record) != engine_identity(other):
        differences.append(f"another engine (sha256 {engine_identity(record)[:12] or 'unknown'}, not "
                           f"{engine_identity(other)[:12] or 'unknown'})")
    served, theirs_served = serving_identity(record), serving_identity(other)
    if (served or theirs_served) and served != theirs_served:
        differences.append(f"other servers ({_served(served)}, not {_served(theirs_served)})")
    if record.data is not None and other.data is not None and \
            record.data.manifest_sha256 != other.data.manifest_sha256:
        differences.append(f"other preprocessed data (manifest.json of {record.data.directory} with sha256 "
                           f"{record.data.manifest_sha256[:12] or 'unknown'}, not "
                           f"{other.data.manifest_sha256[:12] or 'unknown'})")
    return differences


def same_computation(a: RunRecord, b: RunRecord) -> bool:
    return not computation_differences(a, b)
