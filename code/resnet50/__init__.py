"""Benchmark resnet50: models, data sets, preprocessing and accuracy."""
