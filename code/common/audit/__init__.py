"""Compliance tests: audit.config from the rules tables, verification of the runs, verdict files."""
