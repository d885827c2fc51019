#include "toolkit_native/sample_library.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace toolkit {
namespace {

size_t Elements(const std::vector<int64_t>& shape, size_t from = 0) {
  size_t elements = 1;
  for (size_t axis = from; axis < shape.size(); ++axis) elements *= static_cast<size_t>(shape[axis]);
  return elements;
}

// Copies the part of one sample that fits both shapes (from `src`, of `from` shape, to `dst`, of `to` shape),
// axis by axis; what `dst` has beyond it keeps its padding.
void CopyRegion(const char* src, const std::vector<int64_t>& from, char* dst, const std::vector<int64_t>& to,
                size_t itemsize, size_t axis = 0) {
  if (axis == from.size()) {
    std::memcpy(dst, src, itemsize);
    return;
  }
  int64_t extent = std::min(from[axis], to[axis]);
  if (axis + 1 == from.size()) {
    std::memcpy(dst, src, static_cast<size_t>(extent) * itemsize);
    return;
  }
  size_t src_step = Elements(from, axis + 1) * itemsize, dst_step = Elements(to, axis + 1) * itemsize;
  for (int64_t i = 0; i < extent; ++i)
    CopyRegion(src + i * src_step, from, dst + i * dst_step, to, itemsize, axis + 1);
}

void FillWith(const std::vector<char>& value, char* out, size_t elements) {
  if (std::all_of(value.begin(), value.end(), [](char byte) { return byte == 0; })) {
    std::memset(out, 0, elements * value.size());
    return;
  }
  for (size_t i = 0; i < elements; ++i) std::memcpy(out + i * value.size(), value.data(), value.size());
}

}  // namespace

int64_t InputLayout::PaddedSize(int64_t longest) const {
  if (buckets.empty()) return longest;
  for (int64_t bucket : buckets)
    if (bucket >= longest) return bucket;
  throw std::runtime_error("input " + name + ": a sample of " + std::to_string(longest) +
                           " along a varying axis is longer than its largest bucket (" +
                           std::to_string(buckets.back()) + ")");
}

bool InputLayout::fixed() const {
  return std::none_of(shape.begin(), shape.end(), [](int64_t size) { return size < 0; });
}

SampleLibrary::SampleLibrary(size_t total, size_t performance, std::vector<InputLayout> inputs, Loader load)
    : total_(total), performance_(performance), inputs_(std::move(inputs)), load_(std::move(load)),
      slot_(total, -1) {
  if (inputs_.empty()) throw std::invalid_argument("the sample library needs at least one input");
  for (auto& input : inputs_) {
    if (input.itemsize == 0 || input.pad_value.size() != input.itemsize)
      throw std::invalid_argument("input " + input.name + ": its pad value must be one element of its type");
    std::sort(input.buckets.begin(), input.buckets.end());
  }
}

void SampleLibrary::LoadSamplesToRam(const std::vector<mlperf::QuerySampleIndex>& samples) {
  std::vector<LoadedInput> loaded;
  if (!samples.empty()) loaded = load_(samples);
  if (!samples.empty() && loaded.size() != inputs_.size())
    throw std::runtime_error("the sample loader returned " + std::to_string(loaded.size()) + " inputs, not " +
                             std::to_string(inputs_.size()));
  for (size_t k = 0; k < loaded.size(); ++k) {
    const InputLayout& layout = inputs_[k];
    const std::vector<int64_t>& stored = loaded[k].stored_shape;
    bool matches = stored.size() == layout.shape.size();
    for (size_t axis = 0; matches && axis < stored.size(); ++axis)
      matches = layout.shape[axis] < 0 || stored[axis] == layout.shape[axis];
    if (!matches) throw std::runtime_error("the sample loader's input " + layout.name + " has another shape than "
                                           "the model declares");
    if (!layout.fixed() && loaded[k].extents == nullptr)
      throw std::runtime_error("the sample loader gave no per-sample shapes of varying input " + layout.name);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_.swap(loaded);
    std::fill(slot_.begin(), slot_.end(), -1);
    for (size_t i = 0; i < samples.size(); ++i) slot_[samples[i]] = static_cast<int64_t>(i);
  }
  // The previous set (now in `loaded`) is released here, outside the lock.
}

void SampleLibrary::UnloadSamplesFromRam(const std::vector<mlperf::QuerySampleIndex>& samples) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto index : samples) slot_[index] = -1;
}

void SampleLibrary::Gather(const std::vector<mlperf::QuerySampleIndex>& indices, GatheredBatch* out) const {
  std::vector<int64_t> slots(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    slots[i] = slot_[indices[i]];
    if (slots[i] < 0) throw std::runtime_error("a sample was issued but not loaded by LoadGen");
  }
  out->inputs.resize(inputs_.size());
  out->buffers.resize(inputs_.size());
  for (size_t k = 0; k < inputs_.size(); ++k) GatherInput(k, slots, &out->inputs[k], &out->buffers[k]);
}

void SampleLibrary::GatherInput(size_t input, const std::vector<int64_t>& slots, InputBatch* batch,
                                std::vector<char>* buffer) const {
  const InputLayout& layout = inputs_[input];
  const LoadedInput& set = loaded_[input];
  const std::vector<int64_t>& stored = set.stored_shape;
  std::vector<int64_t> target = stored;
  if (set.extents != nullptr) {
    for (size_t axis = 0; axis < stored.size(); ++axis) {
      if (layout.shape[axis] >= 0) continue;
      int64_t longest = 0;
      for (int64_t slot : slots) longest = std::max(longest, set.extents[slot * stored.size() + axis]);
      target[axis] = layout.PaddedSize(longest);
    }
  }
  size_t stored_bytes = Elements(stored) * layout.itemsize, sample_bytes = Elements(target) * layout.itemsize;
  batch->itemsize = layout.itemsize;
  batch->shape.assign(1, static_cast<int64_t>(slots.size()));
  batch->shape.insert(batch->shape.end(), target.begin(), target.end());
  // Samples that lie one after another in the set are handed over where they lie: the backend reads them once from
  // the set, instead of once to copy them and again from the copy. A batch of one always does, and so does nearly
  // every Offline batch: LoadGen issues an Offline query as the loaded set in its order (loadgen.cc, unless
  // sample_concatenate_permutation shuffles it), and the set is held in that order.
  bool adjacent = target == stored;
  for (size_t i = 1; adjacent && i < slots.size(); ++i) adjacent = slots[i] == slots[i - 1] + 1;
  if (adjacent) {
    batch->data = set.data + slots[0] * stored_bytes;
    return;
  }
  buffer->resize(slots.size() * sample_bytes);
  char* out = buffer->data();
  if (target == stored) {
    for (size_t i = 0; i < slots.size(); ++i)
      std::memcpy(out + i * sample_bytes, set.data + slots[i] * stored_bytes, stored_bytes);
  } else {
    FillWith(layout.pad_value, out, slots.size() * Elements(target));
    for (size_t i = 0; i < slots.size(); ++i)
      CopyRegion(set.data + slots[i] * stored_bytes, stored, out + i * sample_bytes, target, layout.itemsize);
  }
  batch->data = out;
}

}  // namespace toolkit
