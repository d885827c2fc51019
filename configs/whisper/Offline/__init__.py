"""whisper Offline. On a CPU: the in-process engines (CTranslate2 by default, --inprocess_engine=onnxruntime for the
toolkit's ONNX Runtime graphs). On NVIDIA GPUs NVIDIA's submissions run Whisper as two TensorRT-LLM engines, the
encoder and the decoder (greedy, in-flight batching over static encoder batches of up to 256 clips per GPU on
H100/H200); the toolkit does not build those: a GPU node serves Whisper with a serving engine and the openai
harness drives it (/v1/audio/transcriptions), which these GPU configs describe (with --harness_type=openai; the
in-process engines run on the CPU)."""
from code.common.config_registry import PerCore, register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.whisper import WhisperBase

SERVED = "openai"


class OfflineCPUBase(WhisperBase):
    scenario = Scenario.Offline
    # tiny.en with CTranslate2 on 2 loaded cores: about 2 s of decoding per 30 s clip of ~100 tokens, i.e. ~0.25
    # clips/s per core; large-v3 is ~40 times the work. An estimate, not a measurement: make find_peak
    # RUN_ARGS="--benchmarks=whisper --scenarios=offline" measures it.
    offline_expected_qps = PerCore(0.005)


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass


@register(GENERIC_CPU, harness=SERVED)
class GenericCPUServing(OfflineCPUBase):
    """Served: as many clips in flight per endpoint as the server batches."""
    openai_in_flight = 8


class OfflineGPUBase(WhisperBase):
    scenario = Scenario.Offline
    # NVIDIA's TensorRT-LLM Whisper: encoder engine of static batches of 256 clips, decoder engine with in-flight
    # batching of 256 sequences; as served here, that many requests in flight per GPU.
    batch_size = 256
    openai_in_flight = 256
    # From the published v6.1 results' order of magnitude (H100: thousands of tokens/s per GPU, ~20 tokens a clip
    # second); make find_peak measures it on the node.
    offline_expected_qps = 100.0


@register("H100_SXM_80GBx1")
class H100_SXM_80GBx1(OfflineGPUBase):
    pass


@register("H200_SXM_141GBx1")
class H200_SXM_141GBx1(OfflineGPUBase):
    offline_expected_qps = 130.0
