"""Benchmark gpt-oss-120b: reasoning (AIME 2025, GPQA diamond, LiveCodeBench v6) by OpenAI's gpt-oss-120b, scored
by exact match per sub-data set, with TEST07 and TEST09 as its compliance tests."""
