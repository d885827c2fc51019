#include "toolkit_native/reference_sut.h"

#include <algorithm>

#include "loadgen.h"

namespace toolkit {

void ReferenceSut::IssueQuery(const std::vector<mlperf::QuerySample>& samples) {
  responses_.clear();
  for (auto& sample : samples) responses_.emplace_back(sample.id, 0, 0);
  size_t step = completion_batch_ == 0 ? responses_.size() : completion_batch_;
  for (size_t start = 0; start < responses_.size(); start += step)
    mlperf::QuerySamplesComplete(responses_.data() + start, std::min(step, responses_.size() - start));
}

}  // namespace toolkit
