"""Accuracy of the reasoning benchmarks gpt-oss-120b and deepseek-r1, scored as the round's official evaluation
scripts score it: each sub-data set's answer extractor (extract.py), MATH-500's PRM800K grader (math_grader.py),
LiveCodeBench's code execution in a sandboxed interpreter (code_runner.py, tests from lcb_tests.py) and the
figures and accuracy.txt line the submission checker reads (scoring.py). The accuracy log reaches them through the
benchmarks' run path (TaskBenchmark.score); their targets are the rules table's."""
