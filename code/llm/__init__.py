"""What the LLM benchmarks share (llama3.1-8b and the task benchmarks of code/llm_tasks): tokenizers and chat
templates, the embedded substitute SmolLM2-135M-Instruct and its conversion into the decoder graph and a Hugging
Face folder, decoder weights read from GGUF or safetensors, the numpy reference decoder, prompt sets and ROUGE."""
