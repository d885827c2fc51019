// LoadGen's SUT on the native core: IssueQuery only enqueues (Batcher); one thread per backend instance takes a
// batch, gathers its inputs from the sample library, calls the instance once and completes the batch from C++.
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
  // One batcher thread per backend (instance).
  Sut(SampleLibrary* qsl, std::vector<std::shared_ptr<Backend>> backends, size_t batch_size, int64_t timeout_us);
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
  void Serve(Backend* backend);
  bool Failed();
  void Fail(const std::string& message);

  std::string name_ = "toolkit_native";
  SampleLibrary* qsl_;
  std::vector<std::shared_ptr<Backend>> backends_;
  Batcher batcher_;
  std::mutex mutex_;
  std::string error_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> issued_{0}, completed_{0}, batches_{0};
};

}  // namespace toolkit
