"""The toolkit's own harness plug-ins (harness/registry.py registers them): in process on Python workers or the native
core (lwis), the in-process LLM harness (token streaming over continuous batching), Triton Inference Servers, and
OpenAI-compatible LLM serving engines (openai), the MLCommons endpoints client (endpoints)."""

# name -> "module:Class": the table code/common/harness/registry.py registers first. The order is the order of
# choice among the implementations of one harness type, and of `make build`'s rows.
TOOLKIT_HARNESSES = {
    "native": "code.common.harness.plugins.inprocess:NativeHarness",
    "python": "code.common.harness.plugins.inprocess:PythonHarness",
    "llm": "code.common.harness.plugins.llm:LLMHarness",
    "engine": "code.common.harness.plugins.benchmark_engine:BenchmarkEngineHarness",
    "triton": "code.common.harness.plugins.triton:TritonHarness",
    "openai": "code.common.harness.plugins.openai:OpenAIHarness",
    "endpoints": "code.common.harness.plugins.endpoints:EndpointsHarness",
}
