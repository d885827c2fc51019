"""Settings of an audit.config that LoadGen ignores and the compliance scripts read (TEST07's accuracy threshold,
TEST09's output-length bounds), read as compliance/TEST07 and TEST09/run_verification.py read them."""
from __future__ import annotations

from typing import Iterable


def audit_config_setting(lines: Iterable[str], setting: str) -> float | None:
    """The value of `setting` in audit.config lines (`model.scenario.setting = value`), as a number; None when no
    line sets it. A key counts when it has at least three dotted parts and its last one is `setting`; comments,
    blank lines and an inline `# ...` after the value are skipped; the last line that sets it wins."""
    found = None
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        parts = key.split(".")
        if len(parts) >= 3 and parts[-1] == setting:
            try:
                found = float(value.split("#", 1)[0].strip())
            except ValueError:
                continue
    return found
