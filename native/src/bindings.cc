// The Python module toolkit_native: the core (sample library, SUT, reference SUT), the C++ backends by name, and
// what each backend source binds itself (the python backend's class). The sample library's loader is a Python
// callable here, called with the GIL; the sets it returns are kept as Python objects and released with the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "toolkit_native/backend.h"
#include "toolkit_native/backend_registry.h"
#include "toolkit_native/bindings.h"
#include "toolkit_native/reference_sut.h"
#include "toolkit_native/sample_library.h"
#include "toolkit_native/sut.h"

namespace py = pybind11;

namespace toolkit {

static std::vector<BindingHook>& Hooks() {
  static std::vector<BindingHook> hooks;
  return hooks;
}

bool RegisterBinding(BindingHook hook) {
  Hooks().push_back(hook);
  return true;
}

namespace {

// A Python object that C++ may hold and drop on any thread: its last reference is released with the GIL.
std::shared_ptr<py::object> Held(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* held) {
    py::gil_scoped_acquire gil;
    delete held;
  });
}

using Int64Array = py::array_t<int64_t, py::array::c_style>;

// `load(indices)` returns, per input in the declared order, (data, extents): data the samples' C-contiguous array
// (samples first), extents None for an input of fixed shape, else an int64 array (samples x dimensions) of each
// sample's own shape.
Loader PythonLoader(py::function load) {
  auto held = Held(std::move(load));
  return [held](const std::vector<mlperf::QuerySampleIndex>& samples) {
    py::gil_scoped_acquire gil;
    std::vector<int64_t> indices(samples.begin(), samples.end());
    py::list result = (*held)(Int64Array(indices.size(), indices.data()));
    std::vector<LoadedInput> loaded;
    for (py::handle item : result) {
      auto pair = item.cast<py::tuple>();
      py::array data = pair[0].cast<py::array>();
      if (!(data.flags() & py::array::c_style) || data.ndim() < 1 ||
          static_cast<size_t>(data.shape(0)) != samples.size())
        throw std::runtime_error("the sample loader must return one C-contiguous array of the samples per input");
      LoadedInput input;
      input.data = static_cast<const char*>(data.data());
      input.stored_shape.assign(data.shape() + 1, data.shape() + data.ndim());
      if (!pair[1].is_none()) {
        auto extents = pair[1].cast<Int64Array>();
        if (extents.ndim() != 2 || static_cast<size_t>(extents.shape(0)) != samples.size() ||
            extents.shape(1) != data.ndim() - 1)
          throw std::runtime_error("the sample loader's shapes must be one row of dimensions per sample");
        input.extents = extents.data();
        pair = py::make_tuple(data, extents);   // the very arrays whose memory is read
      }
      input.owner = Held(pair);
      loaded.push_back(std::move(input));
    }
    return loaded;
  };
}

InputLayout MakeLayout(std::string name, size_t itemsize, std::vector<int64_t> shape, py::bytes pad_value,
                       std::vector<int64_t> buckets) {
  std::string pad = pad_value;
  return InputLayout{std::move(name), itemsize, std::move(shape), std::vector<char>(pad.begin(), pad.end()),
                     std::move(buckets)};
}

template <typename T>
uintptr_t Handle(T* object) {
  return reinterpret_cast<uintptr_t>(object);
}

}  // namespace
}  // namespace toolkit

PYBIND11_MODULE(toolkit_native, m) {
  using namespace toolkit;
  py::class_<InputLayout>(m, "InputLayout")
      .def(py::init(&MakeLayout), py::arg("name"), py::arg("itemsize"), py::arg("shape"), py::arg("pad_value"),
           py::arg("buckets"))
      .def_readonly("name", &InputLayout::name)
      .def_readonly("shape", &InputLayout::shape)
      .def_readonly("buckets", &InputLayout::buckets);
  py::class_<SampleLibrary>(m, "SampleLibrary")
      .def(py::init([](size_t total, size_t performance, std::vector<InputLayout> inputs, py::function load) {
             return new SampleLibrary(total, performance, std::move(inputs), PythonLoader(std::move(load)));
           }),
           py::arg("total"), py::arg("performance"), py::arg("inputs"), py::arg("load"))
      .def_property_readonly("handle", [](SampleLibrary& qsl) {
        return Handle(static_cast<mlperf::QuerySampleLibrary*>(&qsl));
      });
  py::class_<Backend, std::shared_ptr<Backend>>(m, "Backend");
  m.def("create_backend", &CreateBackend, py::arg("name"), py::arg("options"));
  m.def("backend_names", &BackendNames);
  py::class_<Sut>(m, "Sut")
      .def(py::init<SampleLibrary*, std::vector<std::shared_ptr<Backend>>, size_t, int64_t, bool>(),
           py::keep_alive<1, 2>(), py::arg("qsl"), py::arg("backends"), py::arg("batch_size"), py::arg("timeout_us"),
           py::arg("issue_inline") = false)
      .def("start", &Sut::Start, py::call_guard<py::gil_scoped_release>())
      .def("stop", &Sut::Stop, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("handle", [](Sut& sut) { return Handle(static_cast<mlperf::SystemUnderTest*>(&sut)); })
      .def_property_readonly("error", &Sut::error)
      .def_property_readonly("issued", &Sut::issued)
      .def_property_readonly("completed", &Sut::completed)
      .def_property_readonly("batches", &Sut::batches);
  py::class_<ReferenceSut>(m, "ReferenceSut")
      .def(py::init<size_t>(), py::arg("completion_batch") = 0)
      .def_property_readonly("handle", [](ReferenceSut& sut) {
        return Handle(static_cast<mlperf::SystemUnderTest*>(&sut));
      });
  for (BindingHook hook : Hooks()) hook(m);
}
