"""BFCL v4's single-turn accuracy set as the MLCommons endpoints client builds it, and the stratified subset a short
accuracy pass takes of it.

The client (dataset_manager/predefined/bfcl_v4 at ea332753) builds the set from the bfcl-eval package of its
environment: the subsets of the block's categories, each sampled at its category's rate, head first, keeping
max(1, int(size x rate / 100)) of it, or all of it where it holds `subset_floor` samples or fewer. The round's block
(non_live 62 %, live 10 %, hallucination 10 %, floor 25) makes 995 samples of bfcl-eval 2026.3.23 (the version the
client's uv.lock pins), in 12 subsets of 3 categories.

A short pass (a test run, or fewer samples asked with total_sample_count) asks the client, through the same block,
for the rates scaled down and no floor: every subset keeps at least its first sample, and each keeps a head of its
part of the 995, so the subset is part of the 995. The scale is the largest that keeps no more samples than asked
(12, one per subset, at the least). Taking the first samples of the set instead (max_samples) takes them all from
one subset (the client orders the set by subset name: the first 112 are all of the hallucination category's).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..common.endpoints_client.workload import AccuracySubset

# The round's block (the reference example's generate_params, "leave it as-is").
CATEGORY_PCT = {"non_live": 62, "live": 10, "hallucination": 10}
SUBSET_FLOOR = 25
# The client's CATEGORY_MAP, and each single-turn subset's size in bfcl-eval 2026.3.23 (lines of
# bfcl_eval/data/BFCL_v4_<subset>.json).
SUBSET_SIZES: Mapping[str, Mapping[str, int]] = {
    "non_live": {"simple_python": 400, "simple_java": 100, "simple_javascript": 50, "multiple": 200,
                 "parallel": 200, "parallel_multiple": 200},
    "live": {"live_simple": 258, "live_multiple": 1053, "live_parallel": 16, "live_parallel_multiple": 24},
    "hallucination": {"irrelevance": 240, "live_irrelevance": 884},
}
SCALE_STEPS = 1000          # the scales tried: 1/1000 to 1000/1000 of the round's rates
HOW = "the round's per-category rates scaled by {scale:g} without the floor: each subset's first samples"


def kept(size: int, pct: float, floor: int | None) -> int:
    """Samples the client keeps of a subset of `size` at `pct` percent (BFCLv4.generate)."""
    if floor is not None and size <= floor:
        return size
    return max(1, int(size * pct / 100))


def counts(category_pct: Mapping[str, float], floor: int | None) -> dict[str, dict[str, int]]:
    """category -> subset -> samples the client keeps with these rates."""
    return {category: {subset: kept(size, category_pct[category], floor) for subset, size in subsets.items()}
            for category, subsets in SUBSET_SIZES.items()}


def round_counts() -> dict[str, dict[str, int]]:
    """The round's 995 samples, by category and subset."""
    return counts(CATEGORY_PCT, SUBSET_FLOOR)


def minimum() -> int:
    """The smallest stratified subset: one sample of every subset."""
    return sum(len(subsets) for subsets in SUBSET_SIZES.values())


def scaled_pct(scale: float) -> dict[str, float]:
    return {category: round(pct * scale, 6) for category, pct in CATEGORY_PCT.items()}


def stratified(samples: int) -> tuple[Mapping[str, Any], AccuracySubset]:
    """(generate_params, subset) of the largest scaled-rate subset with at most `samples` samples (at least one
    per subset); ValueError below the minimum."""
    if samples < minimum():
        raise ValueError(f"a stratified BFCL v4 subset needs at least {minimum()} samples (one of each subset)")
    best = 1
    for step in range(1, SCALE_STEPS + 1):      # the kept total grows with the scale
        total = sum(sum(parts.values()) for parts in counts(scaled_pct(step / SCALE_STEPS), None).values())
        if total > samples:
            break
        best = step
    scale = best / SCALE_STEPS
    params = {"categories": list(CATEGORY_PCT), "category_sample_pct": scaled_pct(scale)}
    return params, AccuracySubset(of_samples=sum(sum(p.values()) for p in round_counts().values()),
                                  counts=counts(params["category_sample_pct"], None), how=HOW.format(scale=scale),
                                  group_scores="category_scores", part_scores="subset_scores")
