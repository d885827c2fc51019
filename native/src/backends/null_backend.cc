// The null backend: `response_bytes` zero bytes per sample at once, without looking at the inputs. A measuring tool,
// not a stand-in for a model: run through the core, it gives the harness's own ceiling (make bench).
#include <memory>

#include "toolkit_native/backend.h"
#include "toolkit_native/backend_registry.h"

namespace toolkit {
namespace {

class NullBackend : public Backend {
 public:
  explicit NullBackend(size_t response_bytes) : response_bytes_(response_bytes) {}

  void Infer(const Batch& batch, Responses* out) override {
    size_t count = batch.count();
    out->data.assign(count * response_bytes_, 0);
    out->offsets.resize(count + 1);
    for (size_t i = 0; i <= count; ++i) out->offsets[i] = i * response_bytes_;
  }

 private:
  size_t response_bytes_;
};

TOOLKIT_NATIVE_BACKEND(null, "null", [](const BackendOptions& options) -> std::shared_ptr<Backend> {
  return std::make_shared<NullBackend>(CountOption(options, "response_bytes", "null"));
});

}  // namespace
}  // namespace toolkit
