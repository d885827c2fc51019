"""TEST01's whole-response comparison, beside the official verdict (which compares first values only)."""
from __future__ import annotations

import numpy as np

from code.common.audit.verify import compare_accuracy_logs, compare_whole_responses, verify_test01_accuracy
from code.common.benchmark_api import ResponseFormat

DETECTION = ResponseFormat(dtype="float32", fields=("qsl_idx", "ymin", "xmin", "ymax", "xmax", "score", "category_id"),
                           records_per_sample=None, typical_records=10)
CLASS_ID = ResponseFormat(dtype="int32", fields=("class_id",))


def _entry(index: int, records: np.ndarray) -> dict:
    return {"seq_id": index, "qsl_idx": index, "data": records.astype(np.float32).tobytes().hex().upper()}


def _detections(index: int, count: int, score: float = 0.9) -> np.ndarray:
    return np.array([[index, 0.1, 0.2, 0.3, 0.4, score, 1.0]] * count, np.float32)


def test_identical_responses_give_no_warning() -> None:
    reference = [_entry(i, _detections(i, i % 3)) for i in range(6)]
    whole = compare_whole_responses(reference, reference[::2], DETECTION)
    assert whole.compared == 3 and whole.differing == () and whole.warning is None
    assert whole.text() == "compared = 3\ndiffering = 0\n"


def test_a_changed_score_passes_the_official_check_but_is_warned_of() -> None:
    reference = [_entry(i, _detections(i, 2)) for i in range(4)]
    changed = [_entry(1, _detections(1, 2, score=0.5)), _entry(2, _detections(2, 2))]
    official = verify_test01_accuracy(compare_accuracy_logs(reference, changed, DETECTION.np_dtype))
    assert official.passed                       # the first value (the image index) is the same
    whole = compare_whole_responses(reference, changed, DETECTION)
    assert whole.differing == (1,)
    assert "1 of 2 sampled responses differ" in whole.warning
    assert "record 0 score is 0.5, the accuracy run's 0.9" in whole.warning
    assert "differing_qsl_idx = 1" in whole.text()


def test_a_different_number_of_records_is_described_as_such() -> None:
    reference = [_entry(0, _detections(0, 3))]
    whole = compare_whole_responses(reference, [_entry(0, _detections(0, 1))], DETECTION)
    assert "qsl_idx 0: 1 records (qsl_idx, ymin, xmin, ymax, xmax, score, category_id), the accuracy run 3" \
        in whole.warning


def test_fixed_size_responses_and_unmatched_samples() -> None:
    def entry(index: int, value: int) -> dict:
        return {"seq_id": index, "qsl_idx": index, "data": np.array([value], np.int32).tobytes().hex().upper()}

    reference = [entry(i, i) for i in range(3)]
    whole = compare_whole_responses(reference, [entry(0, 0), entry(2, 7), entry(9, 9)], CLASS_ID)
    assert whole.compared == 2 and whole.differing == (2,)   # qsl_idx 9 is not in the accuracy run: not compared
    assert "record 0 class_id is 7, the accuracy run's 2" in whole.warning
