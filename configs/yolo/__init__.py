"""Benchmark-wide defaults of yolo: the closed-division YOLOv11l on the 1525-image "safe" COCO 2017 subset.

Both models take one image per call (batch_size 1): Offline throughput comes from instances, one single-threaded
instance per core on a CPU, as resnet50's Server does (documentation/harness.md, "Why the CPU defaults").
"""
from code.common.config_registry import BenchmarkConfig


class YoloBase(BenchmarkConfig):
    benchmark = "yolo"
    model = "yolov11l"
    dataset = "coco_safe"
    batch_size = 1
    calibration_images = 64
