"""qwen3.6-27b: the edge agentic benchmark of round v6.1, run on the MLCommons endpoints client."""
