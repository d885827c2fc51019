#include "toolkit_native/sut.h"

#include <exception>
#include <stdexcept>
#include <utility>

#include "loadgen.h"

namespace toolkit {

Sut::Sut(SampleLibrary* qsl, std::vector<std::shared_ptr<Backend>> backends, size_t batch_size, int64_t timeout_us)
    : qsl_(qsl), backends_(std::move(backends)), batcher_(batch_size, std::chrono::microseconds(timeout_us)) {
  if (backends_.empty()) throw std::invalid_argument("the native SUT needs at least one backend instance");
  for (auto& backend : backends_)
    if (!backend) throw std::invalid_argument("the native SUT was given no backend (None) for an instance");
}

Sut::~Sut() { Stop(); }

void Sut::IssueQuery(const std::vector<mlperf::QuerySample>& samples) {
  issued_ += samples.size();
  batcher_.Push(samples);
}

void Sut::Start() {
  batcher_.Start();
  for (auto& backend : backends_) threads_.emplace_back([this, backend] { Serve(backend.get()); });
}

void Sut::Stop() {
  batcher_.Stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

std::string Sut::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

bool Sut::Failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !error_.empty();
}

void Sut::Fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.empty()) error_ = message.empty() ? "the backend failed" : message;
}

void Sut::Serve(Backend* backend) {
  std::vector<mlperf::QuerySample> batch;
  std::vector<mlperf::QuerySampleIndex> indices;
  GatheredBatch inputs;
  Responses responses;
  std::vector<mlperf::QuerySampleResponse> done;
  while (batcher_.Take(&batch)) {
    bool failed = Failed();
    done.clear();
    if (!failed) {
      try {
        indices.resize(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) indices[i] = batch[i].index;
        qsl_->Gather(indices, &inputs);
        backend->Infer(Batch{inputs.inputs, indices}, &responses);
        if (responses.offsets.size() != batch.size() + 1)
          throw std::runtime_error("the backend returned offsets for another number of samples");
        for (size_t i = 0; i < batch.size(); ++i)
          done.emplace_back(batch[i].id, reinterpret_cast<uintptr_t>(responses.data.data() + responses.offsets[i]),
                            responses.offsets[i + 1] - responses.offsets[i]);
      } catch (const std::exception& e) {
        Fail(e.what());
        failed = true;
      } catch (...) {
        Fail("");
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

}  // namespace toolkit
