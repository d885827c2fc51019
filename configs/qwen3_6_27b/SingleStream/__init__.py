"""qwen3.6-27b SingleStream: one conversation at a time, replayed turn by turn (the client's agentic_inference load
pattern, concurrency 1). The reference run takes about 2.5 hours on an edge box; an estimate, not a measurement."""
from code.common.config_registry import register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.qwen3_6_27b import Qwen36Base


class SingleStreamCPUBase(Qwen36Base):
    scenario = Scenario.SingleStream
    single_stream_expected_latency_ns = 30_000_000_000


@register(GENERIC_CPU)
class GenericCPU(SingleStreamCPUBase):
    pass
