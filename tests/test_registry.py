"""The one registry class of the plug-in points (code/common/registry.py)."""
from __future__ import annotations

import sys

import pytest

from code.common.errors import UserError
from code.common.registry import DuplicateRegistration, Registry


def test_a_lazy_entry_is_imported_when_first_asked_for():
    registry: Registry = Registry("widget", entries={"fractions": "fractions:Fraction"})
    sys.modules.pop("fractions", None)
    assert "fractions" not in sys.modules and "fractions" in registry
    assert registry.if_loaded("fractions") is None and "fractions" not in sys.modules   # asking never imports
    assert registry.get("fractions")(1, 2) == 0.5 and "fractions" in sys.modules
    assert registry.if_loaded("fractions") is registry.get("fractions")


def test_a_name_registered_twice_names_both_places():
    registry: Registry = Registry("widget")
    registry.register("one", "json:dumps")
    with pytest.raises(DuplicateRegistration, match=r"widget 'one' is registered twice: at .*test_registry\.py:\d+ "
                                                     r"and at .*test_registry\.py:\d+"):
        registry.register("one", "json:loads")


def test_an_unknown_name_suggests_the_closest_and_lists_all():
    registry: Registry = Registry("backend", entries={"onnxruntime": "json:dumps", "tensorrt": "json:loads"})
    with pytest.raises(UserError, match=r"Unknown backend 'onnxruntim'\. Did you mean 'onnxruntime'\? "
                                        r"Available: onnxruntime, tensorrt\."):
        registry.get("onnxruntim")
    with pytest.raises(UserError, match=r"Unknown backend 'tvm'\. Available: onnxruntime, tensorrt\.$"):
        registry.get("tvm")


def test_a_plug_in_registered_for_a_while_leaves_no_trace():
    registry: Registry = Registry("harness", make=lambda cls: cls())
    version = registry.version
    registry.register("made", dict)
    assert registry.get("made") == {} and registry.names() == ("made",) and registry.version > version
    registry.unregister("made")
    assert "made" not in registry and len(registry) == 0
