"""Benchmark deepseek-r1: reasoning over a mixed set (AIME, MATH-500, MMLU-Pro, GPQA, LiveCodeBench) by DeepSeek-R1,
scored by exact match per sub-data set."""
