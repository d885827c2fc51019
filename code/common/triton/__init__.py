"""Triton Inference Server: model repositories, local servers, endpoints (the Triton harness and make serve_triton)."""
