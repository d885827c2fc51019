"""Per-benchmark, per-scenario config classes. See code/common/config_registry.py for the rules."""
