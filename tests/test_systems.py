from code.common.systems import GENERIC_CPU, KnownSystem, match_system
from code.common.systems.info import derived_system_id, short_gpu_name

from .conftest import recorded_detector


def test_detects_dual_socket_xeon_with_eight_h100(dgx_h100):
    assert dgx_h100.cpu.model == "Intel(R) Xeon(R) Platinum 8480C"
    assert (dgx_h100.cpu.sockets, dgx_h100.cpu.cores, dgx_h100.cpu.threads) == (2, 112, 224)
    assert len(dgx_h100.gpus) == 8
    assert dgx_h100.gpus[0].memory_mib == 81559 and dgx_h100.gpus[0].compute_capability == "9.0"
    assert dgx_h100.memory_gib == 2015.7
    assert dgx_h100.os_name == "Ubuntu 22.04.4 LTS"
    assert dgx_h100.cpu.max_mhz == 3800.0
    assert dgx_h100.cpu.caches == ("L1d cache: 5.3 MiB (112 instances)", "L2 cache: 224 MiB (112 instances)",
                                   "L3 cache: 210 MiB (2 instances)")


def test_clock_from_cpuinfo_where_lscpu_reports_no_maximum():
    vm = recorded_detector("kvm_epyc_2core_lscpu.txt", None, cpuinfo="kvm_epyc_2core_cpuinfo.txt").detect()
    assert vm.cpu.max_mhz == 2445.404 and vm.cpu.caches[-1] == "L3 cache: 32 MiB (1 instance)"
    assert recorded_detector(None, None, cpuinfo="kvm_epyc_2core_cpuinfo.txt").detect().cpu.max_mhz == 2445.404
    assert recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect().cpu.max_mhz is None


def test_known_system_is_matched_by_hardware(dgx_h100):
    match = match_system(dgx_h100)
    assert match.is_known and match.system_id == "H100_SXM_80GBx8"
    assert match.candidates[0] == "H100_SXM_80GBx8"
    assert match.candidates[1] == "H100_SXM_80GBx1"  # same GPU, nearest count
    assert match.candidates[-1] == GENERIC_CPU


def test_unknown_cpu_machine_gets_a_derived_id_and_nearest_defaults(kvm_2core):
    assert kvm_2core.gpus == () and "no NVIDIA driver" in kvm_2core.gpu_note
    match = match_system(kvm_2core)
    assert not match.is_known
    assert match.system_id == "AMD_EPYC_2C"
    assert match.candidates == ("AMD_EPYC_2C", GENERIC_CPU)
    assert "make add_custom_system" in match.registration_hint()


def test_unknown_gpu_machine_prefers_gpu_systems():
    info = recorded_detector("dgx_h100_lscpu.txt", "a100_nvidia_smi.csv").detect()
    match = match_system(info)
    assert match.system_id == "A100_SXM4_40GBx2"
    assert all(c.startswith(("H", "L")) for c in match.candidates[1:-1])


def test_cpuinfo_fallback_when_lscpu_is_missing():
    info = recorded_detector(None, None, cpuinfo="kvm_epyc_2core_cpuinfo.txt").detect()
    assert (info.cpu.model, info.cpu.sockets, info.cpu.cores, info.cpu.threads) == ("AMD EPYC", 1, 2, 2)


def test_custom_cpu_system_matches_model_and_core_count(kvm_2core):
    custom = KnownSystem("MyBox", "test box", cpu_model="AMD EPYC", cpu_cores=2)
    assert match_system(kvm_2core, known=(custom,)).system_id == "MyBox"
    other = KnownSystem("BigBox", "test box", cpu_model="AMD EPYC", cpu_cores=64)
    assert match_system(kvm_2core, known=(other,)).system_id == "AMD_EPYC_2C"


def test_system_name_overrides_detection(kvm_2core):
    match = match_system(kvm_2core, system_name="H100_SXM_80GBx1")
    assert match.is_known and match.system_id == "H100_SXM_80GBx1"


def test_derived_names_are_tidy(dgx_h100):
    assert short_gpu_name("NVIDIA H100 80GB HBM3", 81559) == "H100_80GB_HBM3"
    assert short_gpu_name("NVIDIA L4", 23034) == "L4_22GB"
    assert derived_system_id(dgx_h100) == "H100_80GB_HBM3x8"
