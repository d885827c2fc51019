from configs._llm import SingleStream, generic_cpu
from configs.llama3_1_8b_edge import LlamaEdgeBase


class SingleStreamCPUBase(SingleStream, LlamaEdgeBase):
    # One summary of ~128 tokens from the 8B model on a CPU: a minute or more. An estimate, not a measurement.
    single_stream_expected_latency_ns = 60_000_000_000


GenericCPU, GenericCPUServing = generic_cpu(SingleStreamCPUBase)
