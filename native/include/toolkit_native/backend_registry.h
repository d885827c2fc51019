// The native core's C++ backends by name: each backend's source registers a factory at load time, the Python side
// creates instances by the name its backend plug-in gives (BackendPlugin.native_backend), with string options.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "toolkit_native/backend.h"

namespace toolkit {

// What the native SUT hands every C++ backend instance (keys: engine, device, instance, threads, batch_size,
// response_bytes); each backend reads the ones it needs.
using BackendOptions = std::map<std::string, std::string>;
using BackendFactory = std::function<std::shared_ptr<Backend>(const BackendOptions&)>;

// Adds `name`; a second registration of one name is an error (two sources claim it). Returns true, so that a
// source registers with a static initializer (TOOLKIT_NATIVE_BACKEND).
bool RegisterBackend(const std::string& name, BackendFactory factory);
// An instance of backend `name`; std::invalid_argument naming the registered ones for an unknown name.
std::shared_ptr<Backend> CreateBackend(const std::string& name, const BackendOptions& options);
std::vector<std::string> BackendNames();

// Option `key` of backend `backend`; std::invalid_argument naming both where it is missing or not a count.
std::string RequiredOption(const BackendOptions& options, const std::string& key, const std::string& backend);
size_t CountOption(const BackendOptions& options, const std::string& key, const std::string& backend);

}  // namespace toolkit

// Registers a factory `(const BackendOptions&) -> std::shared_ptr<Backend>` under `name` when the library loads.
#define TOOLKIT_NATIVE_BACKEND(id, name, factory) \
  static const bool toolkit_native_backend_##id = ::toolkit::RegisterBackend(name, factory)
