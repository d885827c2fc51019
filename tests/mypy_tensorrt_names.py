"""A mypy plugin that records which qualified `tensorrt.*` names type-checked code uses. It changes nothing.

mypy asks a plugin for a hook by the fully qualified name of what is being used: a function or class called
(`tensorrt.tensorrt.Builder`), a method called (`tensorrt.tensorrt.Builder.build_serialized_network`), an
attribute or property read or written on an instance (`tensorrt.tensorrt.ICudaEngine.num_io_tensors`), an
attribute of a class (`tensorrt.tensorrt.MemoryPoolType.WORKSPACE`). For names starting with `tensorrt.` this
plugin returns a callback that writes `fullname<TAB>path<TAB>line` of each use and returns mypy's own type
unchanged; for every other name it returns None. The callback (rather than recording in the hook lookup itself)
is what gives the file and line of each use, so uses inside the stubs (their default values) or in modules that
mypy only follows are told apart from the checked modules' own.

Names used only in annotations, and attributes that do not exist (mypy reports those as errors), reach no hook.

Configuration, in the mypy config file that loads the plugin:

    [mypy_tensorrt_names]
    output = /path/of/the/record/file
"""
from __future__ import annotations

import configparser
from typing import Callable

from mypy.options import Options
from mypy.plugin import AttributeContext, FunctionContext, MethodContext, Plugin
from mypy.types import Type

PREFIX = "tensorrt."
SECTION = "mypy_tensorrt_names"


class TensorRTNamesPlugin(Plugin):
    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self.output: str | None = None
        if options.config_file:
            config = configparser.ConfigParser()
            config.read(options.config_file)
            self.output = config.get(SECTION, "output", fallback=None)
        self.seen: set[tuple[str, str, int]] = set()

    def record(self, fullname: str, path: str, line: int) -> None:
        key = (fullname, path, line)
        if self.output and key not in self.seen:
            self.seen.add(key)
            with open(self.output, "a", encoding="utf-8") as out:
                out.write(f"{fullname}\t{path}\t{line}\n")

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if not fullname.startswith(PREFIX):
            return None

        def hook(ctx: FunctionContext) -> Type:
            self.record(fullname, getattr(ctx.api, "path", ""), ctx.context.line)
            return ctx.default_return_type
        return hook

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if not fullname.startswith(PREFIX):
            return None

        def hook(ctx: MethodContext) -> Type:
            self.record(fullname, getattr(ctx.api, "path", ""), ctx.context.line)
            return ctx.default_return_type
        return hook

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        return self._attribute(fullname)

    def get_class_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        return self._attribute(fullname)

    def _attribute(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        if not fullname.startswith(PREFIX):
            return None

        def hook(ctx: AttributeContext) -> Type:
            self.record(fullname, getattr(ctx.api, "path", ""), ctx.context.line)
            return ctx.default_attr_type
        return hook


def plugin(version: str) -> type[Plugin]:
    return TensorRTNamesPlugin
