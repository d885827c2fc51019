"""A backend plug-in that lives only in tests/ and names a C++ runner of the native core (its null backend, zero
responses) as what the native harness runs, added by registration alone (`register`). Its Python runner refuses to
load: a native run of a backend with a C++ runner never needs it."""
from __future__ import annotations

import shutil

from code.common.backends import registry
from code.common.backends.registry import BuildRequest, Hardware
from code.common.errors import UserError

NAME = "null-native"


class NullNativePlugin:
    name = NAME
    engine_extension = "onnx"
    batch_specific = False
    precisions = ("fp32",)
    opt_level = "none"
    needs = "the native core"
    native_backend = "null"

    def availability(self) -> str | None:
        return None

    def runtime_version(self) -> str:
        return "null 1.0"

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise UserError(f"{NAME} engines are fp32 only, not {precision}")

    def hardware(self) -> Hardware:
        return Hardware("cpu")

    def quantization(self, precision: str) -> str | None:
        return None

    def build(self, request: BuildRequest) -> None:
        shutil.copyfile(request.model, request.engine)

    def create_backend(self, engine, *, input_names, threads, device, instance=0):
        raise RuntimeError(f"the {NAME} backend runs in the native core only (its C++ null backend)")

    def create_decoder(self, engine, *, threads, device, max_batch, instance=0):
        raise UserError(f"{NAME} runs no decoders")


def register() -> None:
    """What adding a backend takes: its entry in the registry."""
    if NAME not in registry.BACKEND_PLUGINS:
        registry.BACKEND_PLUGINS.register(NAME, f"{__name__}:NullNativePlugin")
