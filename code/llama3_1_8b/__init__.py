"""Benchmark llama3.1-8b (and -edge): a task benchmark (code/llm_tasks) summarizing CNN/DailyMail, scored by ROUGE."""
