"""MLPerf Inference submission toolkit (run as `python3 -m code.main` from the repository root)."""
