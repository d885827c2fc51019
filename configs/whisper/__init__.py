"""Benchmark-wide defaults of whisper: the closed-division openai/whisper-large-v3 on LibriSpeech dev-clean +
dev-other repacked to 1,633 clips, greedy decoding of at most 200 tokens, Offline only.

`batch_size` is the number of clips one engine instance encodes and decodes together. On a CPU one instance uses
every core (CTranslate2's matrix products spread over its threads); `make run` runs the tiny.en substitute on the
shared sample (code/whisper/benchmark.py, `embedded_default`).
"""
from code.common.config_registry import BenchmarkConfig


class WhisperBase(BenchmarkConfig):
    benchmark = "whisper"
    model = "whisper-large-v3"
    dataset = "librispeech_dev"
    batch_size = 8
    instances = 1
