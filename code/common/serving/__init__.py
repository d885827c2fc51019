"""LLM serving engines: OpenAI-compatible servers (vLLM, SGLang, TensorRT-LLM's trtllm-serve), the client the openai
harness streams completions from, and the local servers the toolkit starts."""
