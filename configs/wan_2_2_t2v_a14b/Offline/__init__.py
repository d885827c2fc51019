"""wan-2.2-t2v-a14b Offline: every prompt at once, one video at a time per pipeline process (the diffusers engine).
On a CPU the full model takes about an hour a video (the VAE decode alone minutes); an estimate, not a measurement:
make find_peak measures it."""
from code.common.config_registry import register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.wan_2_2_t2v_a14b import WanBase


class OfflineCPUBase(WanBase):
    scenario = Scenario.Offline
    # About 0.0003 videos/s; the field's floor is 0.001, which the run outlasts anyway (min_query_count 248).
    offline_expected_qps = 0.001


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass
