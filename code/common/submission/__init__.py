"""The submission tree: measurements, systems JSON, staging, truncation, export, checking, packing."""
