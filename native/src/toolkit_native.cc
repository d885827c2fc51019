// The toolkit's native harness core: LoadGen's SUT and QSL in C++ (issue enqueues, batcher threads per instance,
// the performance set in one buffer, completions from C++), with a backend called once per batch: a C++ one
// (NullBackend, for measurement) runs without Python; a Python one takes the GIL once per batch.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loadgen.h"
#include "query_sample.h"
#include "query_sample_library.h"
#include "system_under_test.h"

namespace py = pybind11;
using mlperf::QuerySample;
using mlperf::QuerySampleIndex;
using mlperf::QuerySampleResponse;

namespace toolkit {

// The performance set, loaded by a Python callable once per LoadSamplesToRam into one array, which is kept (not
// copied): batches are gathered from it by address, without the GIL.
class SampleLibrary : public mlperf::QuerySampleLibrary {
 public:
  SampleLibrary(size_t total, size_t performance, py::function load)
      : name_("toolkit_native"), total_(total), performance_(performance), load_(std::move(load)),
        slot_(total, -1) {}

  const std::string& Name() override { return name_; }
  size_t TotalSampleCount() override { return total_; }
  size_t PerformanceSampleCount() override { return performance_; }

  void LoadSamplesToRam(const std::vector<QuerySampleIndex>& samples) override {
    py::gil_scoped_acquire gil;
    std::vector<int64_t> indices(samples.begin(), samples.end());
    py::array loaded = load_(py::array_t<int64_t>(indices.size(), indices.data()));
    py::buffer_info info = loaded.request();
    if (info.ndim < 1 || static_cast<size_t>(info.shape[0]) != samples.size())
      throw std::runtime_error("the sample loader returned the wrong number of samples");
    if (!(loaded.flags() & py::array::c_style))
      throw std::runtime_error("the sample loader must return one C-contiguous array");
    std::lock_guard<std::mutex> lock(mutex_);
    sample_bytes_ = samples.empty() ? 0 : static_cast<size_t>(info.size * info.itemsize) / samples.size();
    loaded_ = loaded;   // the previous set is released here, with the GIL held
    data_ = static_cast<const char*>(info.ptr);
    std::fill(slot_.begin(), slot_.end(), -1);
    for (size_t i = 0; i < samples.size(); ++i) slot_[samples[i]] = static_cast<int64_t>(i);
  }

  void UnloadSamplesFromRam(const std::vector<QuerySampleIndex>& samples) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto index : samples) slot_[index] = -1;
  }

  size_t sample_bytes() const { return sample_bytes_; }

  // Copies the samples of `indices` one after another into `out` (sample_bytes() each).
  void Gather(const std::vector<QuerySampleIndex>& indices, char* out) const {
    for (size_t i = 0; i < indices.size(); ++i) {
      int64_t slot = slot_[indices[i]];
      if (slot < 0) throw std::runtime_error("a sample was issued but not loaded by LoadGen");
      std::memcpy(out + i * sample_bytes_, data_ + slot * sample_bytes_, sample_bytes_);
    }
  }

  uintptr_t handle() { return reinterpret_cast<uintptr_t>(static_cast<mlperf::QuerySampleLibrary*>(this)); }

 private:
  std::string name_;
  size_t total_, performance_;
  py::function load_;
  std::vector<int64_t> slot_;
  py::array loaded_;                // owns the set's memory; released with the GIL (LoadSamplesToRam, destruction)
  const char* data_ = nullptr;
  size_t sample_bytes_ = 0;
  std::mutex mutex_;
};

// One batch's responses: bytes of every sample one after another, and where each starts (count + 1 offsets).
struct Responses {
  std::vector<char> data;
  std::vector<size_t> offsets;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The responses of `count` samples of `sample_bytes` each, gathered in `batch` (their QSL indices in `indices`).
  virtual void Infer(const char* batch, size_t count, size_t sample_bytes,
                     const std::vector<QuerySampleIndex>& indices, Responses* out) = 0;
};

// Returns `response_bytes` zero bytes per sample at once: the harness's own ceiling.
class NullBackend : public Backend {
 public:
  explicit NullBackend(size_t response_bytes) : response_bytes_(response_bytes) {}
  void Infer(const char*, size_t count, size_t, const std::vector<QuerySampleIndex>&, Responses* out) override {
    out->data.assign(count * response_bytes_, 0);
    out->offsets.resize(count + 1);
    for (size_t i = 0; i <= count; ++i) out->offsets[i] = i * response_bytes_;
  }

 private:
  size_t response_bytes_;
};

// A Python callable (batch bytes as a uint8 array, indices) -> (data uint8 array, offsets int64 array), called with
// the GIL once per batch.
class PythonBackend : public Backend {
 public:
  explicit PythonBackend(py::function infer) : infer_(std::move(infer)) {}
  void Infer(const char* batch, size_t count, size_t sample_bytes, const std::vector<QuerySampleIndex>& indices,
             Responses* out) override {
    py::gil_scoped_acquire gil;
    std::vector<int64_t> idx(indices.begin(), indices.end());
    py::tuple result = infer_(py::memoryview::from_memory(batch, static_cast<py::ssize_t>(sample_bytes * count)),
                              py::array_t<int64_t>(idx.size(), idx.data()));
    auto data = result[0].cast<py::array_t<uint8_t, py::array::c_style | py::array::forcecast>>();
    auto offsets = result[1].cast<py::array_t<int64_t, py::array::c_style | py::array::forcecast>>();
    if (static_cast<size_t>(offsets.size()) != count + 1)
      throw std::runtime_error("the backend returned offsets for another number of samples");
    out->data.assign(data.data(), data.data() + data.size());
    out->offsets.assign(offsets.data(), offsets.data() + offsets.size());
  }

 private:
  py::function infer_;
};

// LoadGen's SUT: IssueQuery only enqueues; one batcher thread per instance takes up to batch_size samples (waiting at
// most timeout_us after the first for more), gathers them, calls the backend once, completes them from C++.
class Sut : public mlperf::SystemUnderTest {
 public:
  // One batcher thread per backend (instance).
  Sut(SampleLibrary* qsl, std::vector<std::shared_ptr<Backend>> backends, size_t batch_size, int64_t timeout_us)
      : name_("toolkit_native"), qsl_(qsl), backends_(std::move(backends)),
        batch_size_(std::max<size_t>(1, batch_size)), timeout_(std::chrono::microseconds(timeout_us)) {
    if (backends_.empty()) throw std::invalid_argument("the native SUT needs at least one backend instance");
  }
  ~Sut() override { Stop(); }

  const std::string& Name() override { return name_; }

  void IssueQuery(const std::vector<QuerySample>& samples) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      issued_ += samples.size();
      queue_.insert(queue_.end(), samples.begin(), samples.end());
    }
    ready_.notify_all();
  }

  void FlushQueries() override {}

  void Start() {
    py::gil_scoped_release nogil;
    stopping_ = false;
    for (auto& backend : backends_) threads_.emplace_back([this, backend] { Serve(backend.get()); });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
  }

  uintptr_t handle() { return reinterpret_cast<uintptr_t>(static_cast<mlperf::SystemUnderTest*>(this)); }
  std::string error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  size_t issued() { return issued_; }
  size_t completed() { return completed_; }
  size_t batches() { return batches_; }

 private:
  void Serve(Backend* backend) {
    std::vector<QuerySample> batch;
    std::vector<QuerySampleIndex> indices;
    std::vector<char> inputs;
    Responses responses;
    std::vector<QuerySampleResponse> done;
    while (Take(&batch)) {
      bool failed;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        failed = !error_.empty();
      }
      done.clear();
      if (!failed) {
        try {
          indices.resize(batch.size());
          for (size_t i = 0; i < batch.size(); ++i) indices[i] = batch[i].index;
          inputs.resize(batch.size() * qsl_->sample_bytes());
          qsl_->Gather(indices, inputs.data());
          backend->Infer(inputs.data(), batch.size(), qsl_->sample_bytes(), indices, &responses);
          for (size_t i = 0; i < batch.size(); ++i)
            done.emplace_back(batch[i].id, reinterpret_cast<uintptr_t>(responses.data.data() + responses.offsets[i]),
                              responses.offsets[i + 1] - responses.offsets[i]);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (error_.empty()) error_ = e.what();
          failed = true;
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex_);
          if (error_.empty()) error_ = "the backend failed";
          failed = true;
        }
      }
      if (failed) {  // complete empty, so that LoadGen ends
        done.clear();
        for (auto& sample : batch) done.emplace_back(sample.id, 0, 0);
      }
      mlperf::QuerySamplesComplete(done.data(), done.size());
      completed_ += done.size();
      ++batches_;
    }
  }

  // Up to batch_size samples; false when stopping with nothing left.
  bool Take(std::vector<QuerySample>* batch) {
    batch->clear();
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return false;
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (true) {
      while (!queue_.empty() && batch->size() < batch_size_) {
        batch->push_back(queue_.front());
        queue_.pop_front();
      }
      if (batch->size() >= batch_size_ || stopping_ || timeout_.count() == 0) break;
      if (!ready_.wait_until(lock, deadline, [this] { return stopping_ || !queue_.empty(); })) break;
    }
    return true;
  }

  std::string name_;
  SampleLibrary* qsl_;
  std::vector<std::shared_ptr<Backend>> backends_;
  size_t batch_size_;
  std::chrono::microseconds timeout_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<QuerySample> queue_;
  bool stopping_ = false;
  std::string error_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> issued_{0}, completed_{0}, batches_{0};
};

// LoadGen's BasicSUT of loadgen/benchmark/repro.cpp, the limit: completes every sample inside IssueQuery, in one
// call (completion_batch 0, as repro.cpp) or in calls of completion_batch samples (LoadGen's own cost per completed
// sample then falls inside the measured time, as for any SUT that completes batch by batch).
class ReferenceSut : public mlperf::SystemUnderTest {
 public:
  explicit ReferenceSut(size_t completion_batch = 0) : completion_batch_(completion_batch) {}
  const std::string& Name() override { return name_; }
  void IssueQuery(const std::vector<QuerySample>& samples) override {
    responses_.clear();
    for (auto& sample : samples) responses_.emplace_back(sample.id, 0, 0);
    size_t step = completion_batch_ == 0 ? responses_.size() : completion_batch_;
    for (size_t start = 0; start < responses_.size(); start += step)
      mlperf::QuerySamplesComplete(responses_.data() + start, std::min(step, responses_.size() - start));
  }
  void FlushQueries() override {}
  uintptr_t handle() { return reinterpret_cast<uintptr_t>(static_cast<mlperf::SystemUnderTest*>(this)); }

 private:
  std::string name_ = "reference";
  size_t completion_batch_;
  std::vector<QuerySampleResponse> responses_;
};

}  // namespace toolkit

PYBIND11_MODULE(toolkit_native, m) {
  using namespace toolkit;
  py::class_<SampleLibrary>(m, "SampleLibrary")
      .def(py::init<size_t, size_t, py::function>())
      .def_property_readonly("handle", &SampleLibrary::handle);
  py::class_<Backend, std::shared_ptr<Backend>>(m, "Backend");
  py::class_<NullBackend, Backend, std::shared_ptr<NullBackend>>(m, "NullBackend").def(py::init<size_t>());
  py::class_<PythonBackend, Backend, std::shared_ptr<PythonBackend>>(m, "PythonBackend")
      .def(py::init<py::function>());
  py::class_<Sut>(m, "Sut")
      .def(py::init<SampleLibrary*, std::vector<std::shared_ptr<Backend>>, size_t, int64_t>(), py::keep_alive<1, 2>())
      .def("start", &Sut::Start)
      .def("stop", &Sut::Stop, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("handle", &Sut::handle)
      .def_property_readonly("error", &Sut::error)
      .def_property_readonly("issued", &Sut::issued)
      .def_property_readonly("completed", &Sut::completed)
      .def_property_readonly("batches", &Sut::batches);
  py::class_<ReferenceSut>(m, "ReferenceSut")
      .def(py::init<size_t>(), py::arg("completion_batch") = 0)
      .def_property_readonly("handle", &ReferenceSut::handle);
}
