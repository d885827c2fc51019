"""What the round's LLM benchmarks beyond llama3.1-8b share: a data set of prompts with what each answer is scored
against, the prompts tokenized for the embedded substitute or taken as the official files tokenized them, the
closed-division model served by an OpenAI-compatible serving engine, and the accuracy log read back as text.

Each benchmark (code/llama2_70b, code/deepseek_r1, code/gpt_oss_120b) is a `TaskBenchmark` with its own data
readers, generation settings and scorer."""
