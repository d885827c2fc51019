"""Shared machinery: fields, config registry, systems, rules, paths, harness pieces."""
