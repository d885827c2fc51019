"""The harness child with a backend that fails after a few batches: a fault injected by the tests only.

`python -m tests.fault_child <run_spec.json>` behaves like `code.common.harness.child`, except that every
backend instance raises on its third call, as a real backend would on a device or driver error.
"""
from __future__ import annotations

import sys

import code.common.backends as backends
from code.common.harness import child

_real_create = backends.create_backend


def failing_backend(*args, **kwargs):
    real = _real_create(*args, **kwargs)
    calls = {"n": 0}

    class Failing(backends.Backend):
        input_names = real.input_names

        def infer(self, inputs):
            calls["n"] += 1
            if calls["n"] >= 3:
                raise RuntimeError("injected device failure")
            return real.infer(inputs)

        def close(self) -> None:
            real.close()

    return Failing()


if __name__ == "__main__":
    backends.create_backend = failing_backend
    sys.exit(child.main(sys.argv[1:]))
