// LoadGen's BasicSUT of loadgen/benchmark/repro.cpp, the limit a harness is measured against (make bench): completes
// every sample inside IssueQuery, in one call (completion_batch 0, as repro.cpp) or in calls of completion_batch
// samples (LoadGen's own cost per completed sample then falls inside the measured time, as for any SUT that
// completes batch by batch).
#pragma once

#include <string>
#include <vector>

#include "query_sample.h"
#include "system_under_test.h"

namespace toolkit {

class ReferenceSut : public mlperf::SystemUnderTest {
 public:
  explicit ReferenceSut(size_t completion_batch = 0) : completion_batch_(completion_batch) {}
  const std::string& Name() override { return name_; }
  void IssueQuery(const std::vector<mlperf::QuerySample>& samples) override;
  void FlushQueries() override {}

 private:
  std::string name_ = "reference";
  size_t completion_batch_;
  std::vector<mlperf::QuerySampleResponse> responses_;
};

}  // namespace toolkit
