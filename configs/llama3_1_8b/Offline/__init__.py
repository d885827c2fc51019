from code.common.config_registry import PerCore
from configs._llm import Offline, generic_cpu
from configs.llama3_1_8b import LlamaBase


class OfflineCPUBase(Offline, LlamaBase):
    # Llama-3.1-8B in fp32 reads 32 GB of weights per decode step: on a CPU a few steps per second at most, so a
    # batch of 8 sequences of ~128 tokens gives well under a sample per second. An estimate, not a measurement:
    # make find_peak RUN_ARGS="--benchmarks=llama3.1-8b --scenarios=offline" measures it.
    offline_expected_qps = PerCore(0.005)


GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase)
