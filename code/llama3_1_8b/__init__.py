"""Benchmark llama3.1-8b: the decoder model (GGUF or Hugging Face weights -> ONNX), its tokenizer and data."""
