"""The speech-to-text benchmark whisper: LibriSpeech (repacked to clips of at most 30 s), Whisper greedy decoding,
responses as indices into the reference's 42-symbol label list, scored by word error rate."""
