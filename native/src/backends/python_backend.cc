// The python backend: the bridge to the toolkit's Python runners (ONNX Runtime, TensorRT's Python runner) and the
// benchmark's postprocessing. A Python callable (inputs, indices) -> (data uint8 array, offsets int64 array), where
// `inputs` holds one (memoryview of the bytes, batch shape) pair per input in the model's order, is called with the
// GIL once per batch.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "toolkit_native/backend.h"
#include "toolkit_native/bindings.h"

namespace py = pybind11;

namespace toolkit {
namespace {

class PythonBackend : public Backend {
 public:
  explicit PythonBackend(py::function infer) : infer_(std::move(infer)) {}

  void Infer(const Batch& batch, Responses* out) override {
    // A batcher thread has no Python thread state of its own: pybind11 makes one when the scope takes the GIL and
    // deletes it when the scope ends, and each new one maps its frame stack (Python 3.11+: a chunk of its own) which
    // its deletion unmaps. Once per batch, that is an mmap and an munmap whose TLB flush interrupts the other cores,
    // the instance's intra-op threads among them, in the middle of their operators (measured at batch 1 on 2 cores:
    // 345 of each a second, and 1.3 % of the batcher thread's time in the kernel against 0.1 % without them). The
    // first call on a thread keeps its state for the thread's life instead (one state per batcher thread, freed with
    // the interpreter). A thread that has one already (LoadGen's issuing thread, which started the test from Python)
    // is left as it is.
    static thread_local bool called_here = false;
    const bool keep_state = !called_here && PyGILState_GetThisThreadState() == nullptr;
    called_here = true;
    py::gil_scoped_acquire gil;
    if (keep_state) gil.inc_ref();
    py::list inputs;
    for (const InputBatch& input : batch.inputs) {
      py::tuple shape(input.shape.size());
      for (size_t axis = 0; axis < input.shape.size(); ++axis) shape[axis] = py::int_(input.shape[axis]);
      inputs.append(py::make_tuple(py::memoryview::from_memory(input.data, static_cast<py::ssize_t>(input.bytes())),
                                   shape));
    }
    std::vector<int64_t> indices(batch.indices.begin(), batch.indices.end());
    py::tuple result = infer_(inputs, py::array_t<int64_t>(indices.size(), indices.data()));
    auto data = result[0].cast<py::array_t<uint8_t, py::array::c_style | py::array::forcecast>>();
    auto offsets = result[1].cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>();
    if (static_cast<size_t>(offsets.size()) != batch.count() + 1)
      throw std::runtime_error("the backend returned offsets for another number of samples");
    out->data.assign(data.data(), data.data() + data.size());
    out->offsets.assign(offsets.data(), offsets.data() + offsets.size());
  }

 private:
  py::function infer_;   // released with the GIL: instances are destroyed from Python
};

void Bind(py::module_& module) {
  py::class_<PythonBackend, Backend, std::shared_ptr<PythonBackend>>(module, "PythonBackend")
      .def(py::init<py::function>(), py::arg("infer"));
}

TOOLKIT_NATIVE_BINDING(python, Bind);

}  // namespace
}  // namespace toolkit
