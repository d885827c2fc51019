// What a backend source adds to the Python module (toolkit_native) beyond a registered factory: the python backend
// binds its class, whose constructor takes a Python callable. Hooks run when the module is imported.
#pragma once

#include <pybind11/pybind11.h>

namespace toolkit {

using BindingHook = void (*)(pybind11::module_& module);
bool RegisterBinding(BindingHook hook);

}  // namespace toolkit

#define TOOLKIT_NATIVE_BINDING(id, hook) \
  static const bool toolkit_native_binding_##id = ::toolkit::RegisterBinding(hook)
