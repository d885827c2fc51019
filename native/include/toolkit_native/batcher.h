// The queue between LoadGen's issuing thread and the batcher threads: IssueQuery only pushes; each batcher thread
// takes up to batch_size samples, waiting at most `timeout` after the first for more (0: takes what is queued).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "query_sample.h"

namespace toolkit {

class Batcher {
 public:
  Batcher(size_t batch_size, std::chrono::microseconds timeout);

  void Push(const std::vector<mlperf::QuerySample>& samples);
  // Up to batch_size samples into `batch`; false when stopping with nothing left.
  bool Take(std::vector<mlperf::QuerySample>* batch);
  void Stop();
  void Start();   // takes wait for samples again after a Stop

 private:
  size_t batch_size_;
  std::chrono::microseconds timeout_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<mlperf::QuerySample> queue_;
  bool stopping_ = false;
};

}  // namespace toolkit
