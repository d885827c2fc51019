#include "toolkit_native/backend_registry.h"

#include <stdexcept>
#include <utility>

namespace toolkit {
namespace {

std::map<std::string, BackendFactory>& Factories() {
  static std::map<std::string, BackendFactory> factories;   // filled by static initializers: built on first use
  return factories;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

}  // namespace

bool RegisterBackend(const std::string& name, BackendFactory factory) {
  if (!Factories().emplace(name, std::move(factory)).second)
    throw std::logic_error("two sources of the native core register a backend named " + name);
  return true;
}

std::shared_ptr<Backend> CreateBackend(const std::string& name, const BackendOptions& options) {
  auto found = Factories().find(name);
  if (found == Factories().end())
    throw std::invalid_argument("the native core has no C++ backend named " + name + " (built here: " +
                                Joined(BackendNames()) + ")");
  return found->second(options);
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> names;
  for (const auto& entry : Factories()) names.push_back(entry.first);
  return names;
}

std::string RequiredOption(const BackendOptions& options, const std::string& key, const std::string& backend) {
  auto found = options.find(key);
  if (found == options.end()) throw std::invalid_argument("the " + backend + " backend needs the option " + key);
  return found->second;
}

size_t CountOption(const BackendOptions& options, const std::string& key, const std::string& backend) {
  std::string value = RequiredOption(options, key, backend);
  size_t used = 0;
  unsigned long long count = 0;
  try {
    count = std::stoull(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || value[0] == '-')
    throw std::invalid_argument("the " + backend + " backend's option " + key + " must be a count, not '" + value +
                                "'");
  return static_cast<size_t>(count);
}

}  // namespace toolkit
