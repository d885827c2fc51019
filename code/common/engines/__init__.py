"""Engines: model files optimized (and quantized) for one backend, device and precision (and, for a TensorRT
plan, one batch size), each with a manifest of the inputs it was built from. `builder` is the entry point;
runtimes are imported on use."""
