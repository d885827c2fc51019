// LoadGen's SUT on the native core: IssueQuery only enqueues (Batcher); one thread per backend instance takes a
// batch, gathers its inputs from the sample library, calls the instance once and completes the batch from C++.
// Where `issue_inline` (one instance: SingleStream, whose queries come one at a time), IssueQuery runs the query on
// LoadGen's issuing thread itself, in batches of batch_size, with no thread to wake between LoadGen and the
// instance (that wake-up is inside the latency LoadGen measures).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "system_under_test.h"
#include "toolkit_native/backend.h"
#include "toolkit_native/batcher.h"
#include "toolkit_native/sample_library.h"

namespace toolkit {

class Sut : public mlperf::SystemUnderTest {
 public:
  // One batcher thread per backend (instance), or none where `issue_inline` (which takes exactly one backend).
  Sut(SampleLibrary* qsl, std::vector<std::shared_ptr<Backend>> backends, size_t batch_size, int64_t timeout_us,
      bool issue_inline = false);
  ~Sut() override;

  const std::string& Name() override { return name_; }
  void IssueQuery(const std::vector<mlperf::QuerySample>& samples) override;
  void FlushQueries() override {}

  void Start();
  void Stop();

  std::string error();
  size_t issued() const { return issued_; }
  size_t completed() const { return completed_; }
  size_t batches() const { return batches_; }

 private:
  // The buffers one thread reuses from batch to batch.
  struct Work {
    std::vector<mlperf::QuerySampleIndex> indices;
    GatheredBatch inputs;
    Responses responses;
    std::vector<mlperf::QuerySampleResponse> done;
  };
  void Serve(Backend* backend);
  void Run(Backend* backend, const mlperf::QuerySample* samples, size_t count, Work* work);
  bool Failed();
  void Fail(const std::string& message);

  std::string name_ = "toolkit_native";
  SampleLibrary* qsl_;
  std::vector<std::shared_ptr<Backend>> backends_;
  Batcher batcher_;
  size_t batch_size_;
  bool issue_inline_;
  Work inline_work_;   // the issuing thread's, where issue_inline
  std::mutex mutex_;
  std::string error_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> issued_{0}, completed_{0}, batches_{0};
};

}  // namespace toolkit
