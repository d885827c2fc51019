#include "toolkit_native/sut.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <utility>

#include "loadgen.h"

namespace toolkit {

Sut::Sut(SampleLibrary* qsl, std::vector<std::shared_ptr<Backend>> backends, size_t batch_size, int64_t timeout_us,
         bool issue_inline)
    : qsl_(qsl),
      backends_(std::move(backends)),
      batcher_(batch_size, std::chrono::microseconds(timeout_us)),
      batch_size_(std::max<size_t>(1, batch_size)),
      issue_inline_(issue_inline) {
  if (backends_.empty()) throw std::invalid_argument("the native SUT needs at least one backend instance");
  for (auto& backend : backends_)
    if (!backend) throw std::invalid_argument("the native SUT was given no backend (None) for an instance");
  if (issue_inline_ && backends_.size() != 1)
    throw std::invalid_argument("the native SUT runs queries on LoadGen's thread with exactly one backend instance");
}

Sut::~Sut() { Stop(); }

void Sut::IssueQuery(const std::vector<mlperf::QuerySample>& samples) {
  issued_ += samples.size();
  if (!issue_inline_) {
    batcher_.Push(samples);
    return;
  }
  for (size_t first = 0; first < samples.size(); first += batch_size_)
    Run(backends_[0].get(), samples.data() + first, std::min(batch_size_, samples.size() - first), &inline_work_);
}

void Sut::Start() {
  if (issue_inline_) return;
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
  Work work;
  while (batcher_.Take(&batch)) Run(backend, batch.data(), batch.size(), &work);
}

void Sut::Run(Backend* backend, const mlperf::QuerySample* batch, size_t count, Work* work) {
  bool failed = Failed();
  auto& done = work->done;
  done.clear();
  if (!failed) {
    try {
      work->indices.resize(count);
      for (size_t i = 0; i < count; ++i) work->indices[i] = batch[i].index;
      qsl_->Gather(work->indices, &work->inputs);
      backend->Infer(Batch{work->inputs.inputs, work->indices}, &work->responses);
      const Responses& responses = work->responses;
      if (responses.offsets.size() != count + 1)
        throw std::runtime_error("the backend returned offsets for another number of samples");
      for (size_t i = 0; i < count; ++i)
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
    for (size_t i = 0; i < count; ++i) done.emplace_back(batch[i].id, 0, 0);
  }
  mlperf::QuerySamplesComplete(done.data(), done.size());
  completed_ += done.size();
  ++batches_;
}

}  // namespace toolkit
