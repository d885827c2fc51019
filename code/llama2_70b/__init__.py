"""Benchmark llama2-70b-99.9: OpenOrca question answering by Llama-2-70b-chat, scored by ROUGE."""
