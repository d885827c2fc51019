"""Benchmark-wide defaults of resnet50: the closed-division reference model on ImageNet."""
from code.common.config_registry import BenchmarkConfig


class ResNet50Base(BenchmarkConfig):
    benchmark = "resnet50"
    model = "resnet50_v1.5"
    dataset = "imagenet"
    calibration_images = 500


class ResNet50GPUBase(ResNet50Base):
    """TensorRT on NVIDIA GPUs: INT8 engines, as in NVIDIA's submissions."""

    backend = "tensorrt"
    precision = "int8"
