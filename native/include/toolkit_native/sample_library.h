// LoadGen's QSL: the performance set, handed over by a loader once per LoadSamplesToRam and kept (not copied), with
// several named inputs per sample; batches are gathered from it per input, by address, without Python.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "query_sample_library.h"
#include "toolkit_native/backend.h"

namespace toolkit {

// One named input as the model declares it.
struct InputLayout {
  std::string name;
  size_t itemsize = 0;
  std::vector<int64_t> shape;    // per sample (no batch axis); -1: a varying axis
  std::vector<char> pad_value;   // one element's bytes: what a varying axis is padded with
  std::vector<int64_t> buckets;  // a varying axis is padded to the smallest that holds the batch's longest sample;
                                 // empty: to the batch's longest

  // The size a varying axis takes in a batch whose longest sample has `longest` along it.
  int64_t PaddedSize(int64_t longest) const;
  bool fixed() const;
};

// One input of a loaded set: `count` samples of `stored_shape` (varying axes at the set's longest, the rest of them
// already padded with the pad value) one after another at `data`; `extents` (count x ndim, row-major) gives each
// sample's own shape, nullptr for an input of fixed shape. `owner` keeps both alive and is released on replacement.
struct LoadedInput {
  const char* data = nullptr;
  std::vector<int64_t> stored_shape;
  const int64_t* extents = nullptr;
  std::shared_ptr<void> owner;
};

// Loads the samples at the given QSL indices: one LoadedInput per declared input, in the declared order.
using Loader = std::function<std::vector<LoadedInput>(const std::vector<mlperf::QuerySampleIndex>&)>;

// A batch's gathered inputs: buffers reused from batch to batch by one batcher thread.
struct GatheredBatch {
  std::vector<InputBatch> inputs;
  std::vector<std::vector<char>> buffers;
};

class SampleLibrary : public mlperf::QuerySampleLibrary {
 public:
  SampleLibrary(size_t total, size_t performance, std::vector<InputLayout> inputs, Loader load);

  const std::string& Name() override { return name_; }
  size_t TotalSampleCount() override { return total_; }
  size_t PerformanceSampleCount() override { return performance_; }
  void LoadSamplesToRam(const std::vector<mlperf::QuerySampleIndex>& samples) override;
  void UnloadSamplesFromRam(const std::vector<mlperf::QuerySampleIndex>& samples) override;

  const std::vector<InputLayout>& inputs() const { return inputs_; }
  // The samples of `indices` as one batch per input, varying axes padded by each input's rule: copied into `out`'s
  // buffers, or where they lie one after another in the set at their stored shape (a batch of one, an Offline
  // batch in LoadGen's order), pointed at.
  void Gather(const std::vector<mlperf::QuerySampleIndex>& indices, GatheredBatch* out) const;

 private:
  void GatherInput(size_t input, const std::vector<int64_t>& slots, InputBatch* batch,
                   std::vector<char>* buffer) const;

  std::string name_ = "toolkit_native";
  size_t total_, performance_;
  std::vector<InputLayout> inputs_;
  Loader load_;
  std::vector<int64_t> slot_;
  std::vector<LoadedInput> loaded_;
  std::mutex mutex_;
};

}  // namespace toolkit
