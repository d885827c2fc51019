"""Benchmark-wide defaults of resnet50: the closed-division reference model on ImageNet."""
from code.common.config_registry import BenchmarkConfig


class ResNet50Base(BenchmarkConfig):
    benchmark = "resnet50"
    model = "resnet50_v1.5"
    dataset = "imagenet"
    calibration_images = 500


class ResNet50GPUBase(ResNet50Base):
    """TensorRT on NVIDIA GPUs: INT8 engines, as in NVIDIA's submissions. The systems' figures are NVIDIA's for its
    in-process harness, so their classes register for lwis alone (`harness=LWIS`); another harness on these GPUs
    takes the generic configs until a class registered for it gives its own."""

    backend = "tensorrt"
    precision = "int8"
