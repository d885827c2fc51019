"""The harness child with the plug-ins that live in tests/ registered first (the two-input benchmark, the backend
whose runner is the native core's null backend): `python -m tests.plugins_child <run_spec.json> [<watch pipe fd>]`
is `code.common.harness.child` once they are known, by their registration alone."""
from __future__ import annotations

import sys

from code.common.harness import child
from tests import null_native_plugin, two_input_benchmark

if __name__ == "__main__":
    two_input_benchmark.register()
    null_native_plugin.register()
    sys.exit(child.main(sys.argv[1:]))
