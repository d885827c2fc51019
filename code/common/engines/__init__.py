"""Engines: model files optimized (and quantized) for one backend, device, precision and batch size, each with
a manifest of the inputs it was built from. `builder` is the entry point; runtimes are imported on use."""
