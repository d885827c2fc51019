"""What the round's LLM benchmarks share: a data set of prompts with what each answer is scored against, the
prompts tokenized for the embedded substitute or taken as the official files tokenized them, the closed-division
model (served by an OpenAI-compatible serving engine, or converted into the in-process decoder graph where it is
small enough), and the accuracy log read back as text.

Each benchmark (code/llama3_1_8b, code/llama2_70b, code/deepseek_r1, code/gpt_oss_120b) is a `TaskBenchmark` with
its own data readers, generation settings and scorer."""
