// What a backend of the native core is: called once per batch by a batcher thread, with the batch's inputs gathered
// by the sample library, it writes every sample's response bytes. A C++ backend runs without Python; the python
// backend calls one of the toolkit's Python runners with the GIL once per batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "query_sample.h"

namespace toolkit {

// One named input of a batch: `shape` (batch axis first) elements of `itemsize` bytes, C-contiguous at `data`.
struct InputBatch {
  const char* data = nullptr;
  std::vector<int64_t> shape;
  size_t itemsize = 0;

  size_t bytes() const {
    size_t elements = 1;
    for (int64_t size : shape) elements *= static_cast<size_t>(size);
    return elements * itemsize;
  }
};

// One batch as a backend gets it: its inputs in the model's declared order and the samples' QSL indices.
struct Batch {
  const std::vector<InputBatch>& inputs;
  const std::vector<mlperf::QuerySampleIndex>& indices;

  size_t count() const { return indices.size(); }
};

// One batch's responses: bytes of every sample one after another, and where each starts (count + 1 offsets).
struct Responses {
  std::vector<char> data;
  std::vector<size_t> offsets;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The responses of the batch's samples, in its order. Called by one batcher thread at a time per instance; an
  // exception fails the run (every outstanding sample is then completed empty).
  virtual void Infer(const Batch& batch, Responses* out) = 0;
};

}  // namespace toolkit
