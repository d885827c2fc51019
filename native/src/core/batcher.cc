#include "toolkit_native/batcher.h"

#include <algorithm>

namespace toolkit {

Batcher::Batcher(size_t batch_size, std::chrono::microseconds timeout)
    : batch_size_(std::max<size_t>(1, batch_size)), timeout_(timeout) {}

void Batcher::Push(const std::vector<mlperf::QuerySample>& samples) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.insert(queue_.end(), samples.begin(), samples.end());
  }
  ready_.notify_all();
}

bool Batcher::Take(std::vector<mlperf::QuerySample>* batch) {
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

void Batcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
}

void Batcher::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = false;
}

}  // namespace toolkit
