"""The toolkit's own harness plug-ins (harness/plugin.py registers them): in process on Python workers or the native
core (lwis), the in-process LLM harness (token streaming over continuous batching), and Triton Inference Servers."""
