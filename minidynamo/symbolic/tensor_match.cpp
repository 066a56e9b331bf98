// TENSOR_MATCH in C++: the five tensor tests of one guard, in one call.
//
// Place in the pipeline: the check function of a cache entry (guards.py) calls
// a TensorMatch object on every tensor input before every call:
//
//     ___tensor_match_0(___s1)   # dtype, device, sizes, strides, requires_grad
//
// A size of -1 matches any size: a dynamic dimension, whose size the SHAPE_ENV
// guards check (``L['x'].dim() == 2 and L['x'].size()[1] == 16`` is sizes (-1, 16)).
//
// It reads the same five fields as the readable Python guards
//
//     L['x'].dtype == torch.float32
//     L['x'].is_cpu                        (or L['x'].device == <device>)
//     L['x'].shape == (4,)
//     L['x'].is_contiguous()               (or L['x'].stride() == (...))
//     L['x'].requires_grad is False
//
// but from the C++ tensor itself, as torch's TensorCheck does
// (torch/csrc/dynamo/guards.cpp). Each Python attribute read costs about 80 ns
// (a getter, a torch-function check, a new torch.Size); here the five tests
// cost about as much as one. Note [TENSOR_MATCH runs in C++] in guards.py has
// the measurements. It checks exactly what the Python guards check, no more, so
// that when it says no, evaluating the Python guards one by one names the one
// that failed (a test compares the two on many layouts).
//
// Built on first use with torch.utils.cpp_extension (tensor_match.py); where it
// cannot be built the Python guards run instead.
//
// GlobalState is the same idea for the state every trace depends on (torch's
// GlobalStateGuard in torch/csrc/dynamo/guards.cpp): made at compile time, it
// keeps grad mode, inference mode, autocast (per device type: on or off, and
// its dtype when on), the default dtype, the deterministic-algorithms flags, cuBLAS
// TF32 and fp16/bf16 reduced-precision reductions, the thread count, whether torch
// function is on (DisableTorchFunction(Subclass)) and the autocast cache;
// called with no argument it says whether they are all still the same. One
// call replaces the GLOBAL_STATE guards of guards.py (Note [Global state is one
// guard]), which test exactly these fields.
//
// ModuleMatch is the structure of one nn.Module (guards.py, Note [A module's
// layout is one C++ call]): made from the (name, value is None) pairs of its
// _modules, _parameters and _buffers, and whether it must have no hooks and no
// forward of its own, it reads those dicts from the module's __dict__ and says
// whether they still hold the same names in the same order, None where None
// was. It replaces the NN_MODULE_LAYOUT guards and the NN_MODULE_CALL guard of
// a module called without hooks, which test exactly that.
//
// no_aliasing(n, *tensors) is the NO_TENSOR_ALIASING guard's identity tests (the
// first n tensors, the ones the graph writes to, are none of the others).
//
// ItemsMatch is TENSOR_MATCH for the tensor items of one tuple or list (``def
// f(*xs)``): their type, their TensorMatch and the no-aliasing tests among them, in
// one call instead of one per item (guards.py, Note [A sequence of tensors is one
// C++ call]); torch's guard tree checks each item in a child GuardManager, in C++.

#include <Python.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <exception>
#include <new>
#include <utility>
#include <vector>

namespace {

struct TensorMatch {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  at::ScalarType dtype;
  bool cpu_only;  // device None: the tensor must be on the CPU (L['x'].is_cpu)
  c10::Device device;
  std::vector<int64_t> sizes;
  bool contiguous_only;  // strides None: L['x'].is_contiguous()
  std::vector<int64_t> strides;
  bool requires_grad;
  PyObject* args;  // what it was made from, for repr
};

bool read_ints(PyObject* seq, std::vector<int64_t>& out, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out.push_back(v);
  }
  Py_DECREF(fast);
  return true;
}

bool same(c10::IntArrayRef actual, const std::vector<int64_t>& expected) {
  return actual.size() == expected.size() && std::equal(actual.begin(), actual.end(), expected.begin());
}

// sizes (or strides) with -1 where one is dynamic (checked by the SHAPE_ENV guards): any value matches there
bool same_sizes(c10::IntArrayRef actual, const std::vector<int64_t>& expected) {
  if (actual.size() != expected.size()) return false;
  for (size_t i = 0; i < expected.size(); ++i)
    if (expected[i] != -1 && actual[i] != expected[i]) return false;
  return true;
}

// 1: the five fields hold, 0: they do not, -1: an error is set.
int tensor_matches(const TensorMatch* self, PyObject* obj) {
  if (!THPVariable_Check(obj)) return 0;
  try {
    const at::Tensor& t = THPVariable_Unpack(obj);
    return t.scalar_type() == self->dtype &&
           (self->cpu_only ? t.is_cpu() : t.device() == self->device) &&
           same_sizes(t.sizes(), self->sizes) &&
           (self->contiguous_only ? t.is_contiguous() : same_sizes(t.strides(), self->strides)) &&
           t.requires_grad() == self->requires_grad;
  } catch (const std::exception& e) {  // a nested or sparse tensor: its sizes or strides cannot be read
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return -1;
  }
}

PyObject* tensor_match_call(PyObject* self_, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<TensorMatch*>(self_);
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "TensorMatch takes one tensor");
    return nullptr;
  }
  int ok = tensor_matches(self, args[0]);
  return ok < 0 ? nullptr : PyBool_FromLong(ok);
}

PyObject* tensor_match_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *dtype, *device, *sizes, *strides, *requires_grad;
  static const char* names[] = {"dtype", "device", "sizes", "strides", "requires_grad", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO", const_cast<char**>(names), &dtype, &device, &sizes,
                                   &strides, &requires_grad))
    return nullptr;
  if (!THPDtype_Check(dtype)) {
    PyErr_SetString(PyExc_TypeError, "TensorMatch: dtype must be a torch.dtype");
    return nullptr;
  }
  if (device != Py_None && !THPDevice_Check(device)) {
    PyErr_SetString(PyExc_TypeError, "TensorMatch: device must be a torch.device, or None for the CPU");
    return nullptr;
  }
  auto* self = reinterpret_cast<TensorMatch*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = tensor_match_call;
  self->dtype = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  self->cpu_only = device == Py_None;
  new (&self->device) c10::Device(self->cpu_only ? c10::Device(c10::kCPU) : reinterpret_cast<THPDevice*>(device)->device);
  new (&self->sizes) std::vector<int64_t>();
  new (&self->strides) std::vector<int64_t>();
  self->contiguous_only = strides == Py_None;
  self->args = nullptr;
  int rg = PyObject_IsTrue(requires_grad);
  if (rg < 0 || !read_ints(sizes, self->sizes, "TensorMatch: sizes must be a sequence of ints") ||
      (!self->contiguous_only && !read_ints(strides, self->strides, "TensorMatch: strides must be ints or None"))) {
    Py_DECREF(self);
    return nullptr;
  }
  self->requires_grad = rg == 1;
  self->args = PyTuple_Pack(5, dtype, device, sizes, strides, requires_grad);
  if (self->args == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void tensor_match_dealloc(PyObject* self_) {
  auto* self = reinterpret_cast<TensorMatch*>(self_);
  self->sizes.~vector();
  self->strides.~vector();
  Py_XDECREF(self->args);
  Py_TYPE(self_)->tp_free(self_);
}

PyObject* tensor_match_repr(PyObject* self_) {
  PyObject* a = reinterpret_cast<TensorMatch*>(self_)->args;
  return PyUnicode_FromFormat("TensorMatch(dtype=%R, device=%R, sizes=%R, strides=%R, requires_grad=%R)",
                              PyTuple_GET_ITEM(a, 0), PyTuple_GET_ITEM(a, 1), PyTuple_GET_ITEM(a, 2),
                              PyTuple_GET_ITEM(a, 3), PyTuple_GET_ITEM(a, 4));
}

PyTypeObject TensorMatchType = {PyVarObject_HEAD_INIT(nullptr, 0)};


// --- GlobalState ---------------------------------------------------------------

// the device types whose autocast state is kept, as guards.py's AUTOCAST_DEVICES
const c10::DeviceType kAutocastDevices[] = {c10::DeviceType::CPU, c10::DeviceType::CUDA, c10::DeviceType::XPU,
                                            c10::DeviceType::IPU, c10::DeviceType::HPU, c10::DeviceType::XLA,
                                            c10::DeviceType::PrivateUse1, c10::DeviceType::MPS};
constexpr int kNumAutocast = sizeof(kAutocastDevices) / sizeof(kAutocastDevices[0]);

struct State {
  bool grad_mode, inference_mode, deterministic, deterministic_warn_only;
  bool autocast[kNumAutocast];
  at::ScalarType autocast_dtype[kNumAutocast];  // compared only where autocast is on
  at::ScalarType default_dtype;
  // the rest of torch's GlobalStateGuard (torch/csrc/dynamo/guards.cpp): cuBLAS TF32 and reduced-precision
  // reductions, the intra-op thread count, torch function on / all off, the autocast weight cache
  bool allow_tf32, torch_function, torch_function_all_disabled, autocast_cache;
  uint8_t allow_fp16_reduce, allow_bf16_reduce;
  int num_threads;

  static State now() {
    State s;
    s.grad_mode = c10::GradMode::is_enabled();
    s.inference_mode = c10::InferenceMode::is_enabled();
    s.deterministic = at::globalContext().deterministicAlgorithms();
    s.deterministic_warn_only = at::globalContext().deterministicAlgorithmsWarnOnly();
    for (int i = 0; i < kNumAutocast; ++i) {
      s.autocast[i] = at::autocast::is_autocast_enabled(kAutocastDevices[i]);
      s.autocast_dtype[i] = s.autocast[i] ? at::autocast::get_autocast_dtype(kAutocastDevices[i]) : at::kFloat;
    }
    s.default_dtype = c10::get_default_dtype_as_scalartype();
    auto& ctx = at::globalContext();
    s.allow_tf32 = ctx.allowTF32CuBLAS();
    s.allow_fp16_reduce = static_cast<uint8_t>(ctx.allowFP16ReductionCuBLAS());
    s.allow_bf16_reduce = static_cast<uint8_t>(ctx.allowBF16ReductionCuBLAS());
    s.num_threads = at::get_num_threads();
    s.torch_function = at::impl::PythonTorchFunctionTLS::get_disabled_state() == at::impl::TorchFunctionDisabledState::ENABLED;
    s.torch_function_all_disabled = at::impl::torch_function_all_disabled();
    s.autocast_cache = at::autocast::is_autocast_cache_enabled();
    return s;
  }

  bool operator==(const State& o) const {
    if (grad_mode != o.grad_mode || inference_mode != o.inference_mode || deterministic != o.deterministic ||
        deterministic_warn_only != o.deterministic_warn_only || default_dtype != o.default_dtype ||
        allow_tf32 != o.allow_tf32 || allow_fp16_reduce != o.allow_fp16_reduce ||
        allow_bf16_reduce != o.allow_bf16_reduce || num_threads != o.num_threads || torch_function != o.torch_function ||
        torch_function_all_disabled != o.torch_function_all_disabled || autocast_cache != o.autocast_cache)
      return false;
    for (int i = 0; i < kNumAutocast; ++i)
      if (autocast[i] != o.autocast[i] || (autocast[i] && autocast_dtype[i] != o.autocast_dtype[i])) return false;
    return true;
  }
};

struct GlobalState {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  State state;
};

PyObject* global_state_call(PyObject* self_, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 0 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "GlobalState() takes no arguments when called");
    return nullptr;
  }
  return PyBool_FromLong(reinterpret_cast<GlobalState*>(self_)->state == State::now());
}

PyObject* global_state_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  if (PyTuple_GET_SIZE(args) != 0 || (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0)) {
    PyErr_SetString(PyExc_TypeError, "GlobalState() takes no arguments: it keeps the state of now");
    return nullptr;
  }
  auto* self = reinterpret_cast<GlobalState*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = global_state_call;
  self->state = State::now();
  return reinterpret_cast<PyObject*>(self);
}

PyTypeObject GlobalStateType = {PyVarObject_HEAD_INIT(nullptr, 0)};


// --- ModuleMatch ---------------------------------------------------------------

PyObject* kTableNames[3];  // "_modules", "_parameters", "_buffers" (interned at import)
PyObject* kHookNames[4];   // "_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"
PyObject* kForward;        // "forward"

struct ModuleMatch {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  std::vector<std::pair<PyObject*, bool>> tables[3];  // (name, value is None), owned references
  bool no_hooks;  // also: no forward hooks, no backward hooks, no instance "forward"
  PyObject* args;
};

int same_key(PyObject* key, PyObject* expected) {
  return key == expected ? 1 : PyObject_RichCompareBool(key, expected, Py_EQ);
}

// [(k, v is None) for k, v in table.items()] == expected, for any mapping: its own items()
int items_match(PyObject* table, const std::vector<std::pair<PyObject*, bool>>& expected) {
  PyObject* items = PyObject_CallMethod(table, "items", nullptr);
  if (items == nullptr) return -1;
  PyObject* it = PyObject_GetIter(items);
  Py_DECREF(items);
  if (it == nullptr) return -1;
  int ok = 1;
  size_t i = 0;
  PyObject* pair;
  while (ok == 1 && (pair = PyIter_Next(it)) != nullptr) {
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || i >= expected.size()) {
      ok = 0;
    } else {
      const auto& e = expected[i++];
      ok = (PyTuple_GET_ITEM(pair, 1) == Py_None) != e.second ? 0 : same_key(PyTuple_GET_ITEM(pair, 0), e.first);
    }
    Py_DECREF(pair);
  }
  Py_DECREF(it);
  if (PyErr_Occurred()) return -1;
  return ok == 1 && i == expected.size() ? 1 : ok < 0 ? -1 : 0;
}

// [(k, v is None) for k, v in table.items()] == expected
int table_matches(PyObject* table, const std::vector<std::pair<PyObject*, bool>>& expected) {
  if (!PyDict_CheckExact(table)) return items_match(table, expected);  // an OrderedDict keeps its own order
  if (PyDict_GET_SIZE(table) != static_cast<Py_ssize_t>(expected.size())) return 0;
  Py_ssize_t pos = 0, i = 0;
  PyObject *key, *value;
  while (PyDict_Next(table, &pos, &key, &value)) {
    const auto& e = expected[i++];
    if ((value == Py_None) != e.second) return 0;
    int same = same_key(key, e.first);
    if (same <= 0) return same;
  }
  return 1;
}

PyObject* module_match_call(PyObject* self_, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<ModuleMatch*>(self_);
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "ModuleMatch takes one module");
    return nullptr;
  }
  PyObject* dict = PyObject_GenericGetDict(args[0], nullptr);
  if (dict == nullptr) return nullptr;
  int ok = PyDict_Check(dict);
  for (int t = 0; ok == 1 && t < 3; ++t) {
    PyObject* table = PyDict_GetItemWithError(dict, kTableNames[t]);  // borrowed
    ok = table == nullptr ? (PyErr_Occurred() ? -1 : 0) : table_matches(table, self->tables[t]);
  }
  for (int h = 0; ok == 1 && self->no_hooks && h < 4; ++h) {
    PyObject* hooks = PyDict_GetItemWithError(dict, kHookNames[h]);
    ok = hooks == nullptr ? (PyErr_Occurred() ? -1 : 0) : PyObject_Not(hooks);  // empty: 1
  }
  if (ok == 1 && self->no_hooks) {
    int has = PyDict_Contains(dict, kForward);
    ok = has < 0 ? -1 : !has;
  }
  Py_DECREF(dict);
  if (ok < 0) return nullptr;
  return PyBool_FromLong(ok);
}

bool read_layout(PyObject* seq, std::vector<std::pair<PyObject*, bool>>& out) {
  PyObject* fast = PySequence_Fast(seq, "ModuleMatch: a layout is a sequence of (name, is_none) pairs");
  if (fast == nullptr) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    PyObject* pair = PySequence_Fast_GET_ITEM(fast, i);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
      PyErr_SetString(PyExc_TypeError, "ModuleMatch: a layout is a sequence of (name, is_none) pairs");
      Py_DECREF(fast);
      return false;
    }
    int none = PyObject_IsTrue(PyTuple_GET_ITEM(pair, 1));
    if (none < 0) {
      Py_DECREF(fast);
      return false;
    }
    PyObject* key = PyTuple_GET_ITEM(pair, 0);
    Py_INCREF(key);
    out.emplace_back(key, none == 1);
  }
  Py_DECREF(fast);
  return true;
}

PyObject* module_match_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *modules, *parameters, *buffers, *no_hooks;
  static const char* names[] = {"modules", "parameters", "buffers", "no_hooks", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO", const_cast<char**>(names), &modules, &parameters, &buffers,
                                   &no_hooks))
    return nullptr;
  auto* self = reinterpret_cast<ModuleMatch*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = module_match_call;
  for (auto& t : self->tables) new (&t) std::vector<std::pair<PyObject*, bool>>();
  self->args = nullptr;
  int nh = PyObject_IsTrue(no_hooks);
  if (nh < 0 || !read_layout(modules, self->tables[0]) || !read_layout(parameters, self->tables[1]) ||
      !read_layout(buffers, self->tables[2])) {
    Py_DECREF(self);
    return nullptr;
  }
  self->no_hooks = nh == 1;
  self->args = PyTuple_Pack(4, modules, parameters, buffers, no_hooks);
  if (self->args == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void module_match_dealloc(PyObject* self_) {
  auto* self = reinterpret_cast<ModuleMatch*>(self_);
  for (auto& t : self->tables) {
    for (auto& e : t) Py_DECREF(e.first);
    t.~vector();
  }
  Py_XDECREF(self->args);
  Py_TYPE(self_)->tp_free(self_);
}

PyObject* module_match_repr(PyObject* self_) {
  PyObject* a = reinterpret_cast<ModuleMatch*>(self_)->args;
  return PyUnicode_FromFormat("ModuleMatch(modules=%R, parameters=%R, buffers=%R, no_hooks=%R)",
                              PyTuple_GET_ITEM(a, 0), PyTuple_GET_ITEM(a, 1), PyTuple_GET_ITEM(a, 2),
                              PyTuple_GET_ITEM(a, 3));
}

PyTypeObject ModuleMatchType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- ItemsMatch ------------------------------------------------------------------

// True when no object appears twice among objs: every pair compared while few, else one pass over
// an open-addressing table of the pointers (NO_TENSOR_ALIASING over every tensor input, as torch's
// check_no_aliasing, which uses a set): 200 inputs cost well under a microsecond.
bool all_distinct(const std::vector<PyObject*>& objs) {
  size_t n = objs.size();
  if (n <= 16) {
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j)
        if (objs[i] == objs[j]) return false;
    return true;
  }
  size_t cap = 64;
  while (cap < 2 * n) cap <<= 1;
  thread_local std::vector<PyObject*> table;
  table.assign(cap, nullptr);
  for (PyObject* o : objs) {
    uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(o) >> 4) * 0x9E3779B97F4A7C15ull;
    size_t i = static_cast<size_t>(h >> 32) & (cap - 1);
    while (table[i] != nullptr) {
      if (table[i] == o) return false;
      i = (i + 1) & (cap - 1);
    }
    table[i] = o;
  }
  return true;
}

// ItemsMatch(indices, types, matchers, written, distinct)(seq) -> bool: the guards of
// the tensor items of one tuple or list in one call (guards.py, Note [A sequence of
// tensors is one C++ call]): for each k, type(seq[indices[k]]) is types[k] and
// matchers[k] (a TensorMatch) holds; then, as no_aliasing, none of the items at the
// positions ``written`` is another of the items at ``distinct``.
struct ItemsMatch {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  std::vector<Py_ssize_t> indices, written, distinct;
  std::vector<PyObject*> types;  // borrowed: kept alive by args
  std::vector<TensorMatch*> matchers;
  PyObject* args;
};

PyObject* items_match_call(PyObject* self_, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<ItemsMatch*>(self_);
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "ItemsMatch takes one tuple or list");
    return nullptr;
  }
  PyObject* seq = args[0];
  PyObject** items;
  Py_ssize_t n;
  if (PyTuple_CheckExact(seq)) {
    items = &PyTuple_GET_ITEM(seq, 0);
    n = PyTuple_GET_SIZE(seq);
  } else if (PyList_CheckExact(seq)) {
    items = PySequence_Fast_ITEMS(seq);
    n = PyList_GET_SIZE(seq);
  } else {
    Py_RETURN_FALSE;
  }
  for (size_t k = 0; k < self->indices.size(); ++k) {
    Py_ssize_t i = self->indices[k];
    if (i >= n || reinterpret_cast<PyObject*>(Py_TYPE(items[i])) != self->types[k]) Py_RETURN_FALSE;
    int ok = tensor_matches(self->matchers[k], items[i]);
    if (ok <= 0) return ok < 0 ? nullptr : (Py_INCREF(Py_False), Py_False);
  }
  if (!self->written.empty() && self->written.size() == self->distinct.size()) {  // every pair (the usual case)
    std::vector<PyObject*> objs;
    objs.reserve(self->distinct.size());
    for (Py_ssize_t d : self->distinct) {
      if (d >= n) Py_RETURN_FALSE;
      objs.push_back(items[d]);
    }
    if (!all_distinct(objs)) Py_RETURN_FALSE;
    Py_RETURN_TRUE;
  }
  for (Py_ssize_t w : self->written) {
    if (w >= n) Py_RETURN_FALSE;
    for (Py_ssize_t d : self->distinct)
      if (d != w && d < n && items[d] == items[w]) Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

bool read_sizes(PyObject* seq, std::vector<Py_ssize_t>& out) {
  std::vector<int64_t> v;
  if (!read_ints(seq, v, "ItemsMatch: indices must be ints")) return false;
  for (int64_t i : v) {
    if (i < 0) {
      PyErr_SetString(PyExc_ValueError, "ItemsMatch: indices must be >= 0");
      return false;
    }
    out.push_back(static_cast<Py_ssize_t>(i));
  }
  return true;
}

PyObject* items_match_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *indices, *types, *matchers, *written, *distinct;
  static const char* names[] = {"indices", "types", "matchers", "written", "distinct", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!OO", const_cast<char**>(names), &indices, &PyTuple_Type,
                                   &types, &PyTuple_Type, &matchers, &written, &distinct))
    return nullptr;
  auto* self = reinterpret_cast<ItemsMatch*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = items_match_call;
  new (&self->indices) std::vector<Py_ssize_t>();
  new (&self->written) std::vector<Py_ssize_t>();
  new (&self->distinct) std::vector<Py_ssize_t>();
  new (&self->types) std::vector<PyObject*>();
  new (&self->matchers) std::vector<TensorMatch*>();
  self->args = PyTuple_Pack(5, indices, types, matchers, written, distinct);
  if (self->args == nullptr || !read_sizes(indices, self->indices) || !read_sizes(written, self->written) ||
      !read_sizes(distinct, self->distinct)) {
    Py_DECREF(self);
    return nullptr;
  }
  size_t n = self->indices.size();
  if (static_cast<size_t>(PyTuple_GET_SIZE(types)) != n || static_cast<size_t>(PyTuple_GET_SIZE(matchers)) != n) {
    PyErr_SetString(PyExc_ValueError, "ItemsMatch: one type and one TensorMatch per index");
    Py_DECREF(self);
    return nullptr;
  }
  for (size_t k = 0; k < n; ++k) {
    PyObject* m = PyTuple_GET_ITEM(matchers, k);
    if (Py_TYPE(m) != &TensorMatchType || !PyType_Check(PyTuple_GET_ITEM(types, k))) {
      PyErr_SetString(PyExc_TypeError, "ItemsMatch: types must be types, matchers TensorMatch objects");
      Py_DECREF(self);
      return nullptr;
    }
    self->types.push_back(PyTuple_GET_ITEM(types, k));
    self->matchers.push_back(reinterpret_cast<TensorMatch*>(m));
  }
  return reinterpret_cast<PyObject*>(self);
}

void items_match_dealloc(PyObject* self_) {
  auto* self = reinterpret_cast<ItemsMatch*>(self_);
  self->indices.~vector();
  self->written.~vector();
  self->distinct.~vector();
  self->types.~vector();
  self->matchers.~vector();
  Py_XDECREF(self->args);
  Py_TYPE(self_)->tp_free(self_);
}

PyTypeObject ItemsMatchType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- no_aliasing -----------------------------------------------------------------

// no_aliasing(n, t0, ..., tk) -> bool: none of the first n objects is another of the
// arguments (the NO_TENSOR_ALIASING guard of guards.py, Note [Distinct tensors stay
// distinct]: ___check_not_aliased((written...), (all...)) with the written first).
// Identity tests only, as the unrolled Python ``is`` tests: 600 of them cost ~12 us
// as bytecode and well under 1 us here.
PyObject* no_aliasing(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || !PyLong_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "no_aliasing(n_written, *tensors)");
    return nullptr;
  }
  Py_ssize_t written = PyLong_AsSsize_t(args[0]);
  if (written < 0 || written > nargs - 1) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "no_aliasing: n_written out of range");
    return nullptr;
  }
  if (written == nargs - 1) {  // every pair: sorted when many
    std::vector<PyObject*> objs(args + 1, args + nargs);
    if (!all_distinct(objs)) Py_RETURN_FALSE;
    Py_RETURN_TRUE;
  }
  for (Py_ssize_t w = 1; w <= written; ++w)
    for (Py_ssize_t i = w + 1; i < nargs; ++i)
      if (args[w] == args[i]) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

PyMethodDef module_methods[] = {
    {"no_aliasing", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(no_aliasing)), METH_FASTCALL,
     "no_aliasing(n_written, *tensors) -> bool: none of the first n_written is another of the tensors"},
    {nullptr, nullptr, 0, nullptr},
};

// torch.utils.cpp_extension names the module (tensor_match.py puts a hash of this file in the name)
#ifndef TORCH_EXTENSION_NAME
#define TORCH_EXTENSION_NAME minidynamo_tensor_match
#endif
#define MD_CONCAT2(a, b) a##b
#define MD_CONCAT(a, b) MD_CONCAT2(a, b)
#define MD_STR2(a) #a
#define MD_STR(a) MD_STR2(a)

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, MD_STR(TORCH_EXTENSION_NAME),
                          "TENSOR_MATCH, GLOBAL_STATE and module-layout guards checked in C++ (minidynamo/symbolic/guards.py).", -1,
                          module_methods};

// One callable guard type: a vectorcall object made by tp_new (the three types above share this setup).
bool ready_type(PyTypeObject& type, const char* name, const char* doc, Py_ssize_t size, Py_ssize_t vectorcall_offset,
                newfunc tp_new, destructor dealloc, reprfunc repr) {
  type.tp_name = name;
  type.tp_doc = doc;
  type.tp_basicsize = size;
  type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  type.tp_vectorcall_offset = vectorcall_offset;
  type.tp_call = PyVectorcall_Call;
  type.tp_new = tp_new;
  if (dealloc != nullptr) type.tp_dealloc = dealloc;
  if (repr != nullptr) type.tp_repr = repr;
  return PyType_Ready(&type) == 0;
}

bool add_type(PyObject* module, const char* name, PyTypeObject& type) {
  Py_INCREF(&type);
  if (PyModule_AddObject(module, name, reinterpret_cast<PyObject*>(&type)) < 0) {
    Py_DECREF(&type);
    return false;
  }
  return true;
}

}  // namespace

PyMODINIT_FUNC MD_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  if (!ready_type(TensorMatchType, "minidynamo.TensorMatch",
                  "TensorMatch(dtype, device|None, sizes, strides|None, requires_grad)(tensor) -> bool",
                  sizeof(TensorMatch), offsetof(TensorMatch, vectorcall), tensor_match_new, tensor_match_dealloc,
                  tensor_match_repr) ||
      !ready_type(GlobalStateType, "minidynamo.GlobalState",
                  "GlobalState()() -> bool: grad mode, inference mode, autocast, default dtype, "
                  "deterministic algorithms as when it was made",
                  sizeof(GlobalState), offsetof(GlobalState, vectorcall), global_state_new, nullptr, nullptr) ||
      !ready_type(ModuleMatchType, "minidynamo.ModuleMatch",
                  "ModuleMatch(modules, parameters, buffers, no_hooks)(module) -> bool: the module's "
                  "_modules/_parameters/_buffers hold these (name, is_none) pairs in order (and no hooks)",
                  sizeof(ModuleMatch), offsetof(ModuleMatch, vectorcall), module_match_new, module_match_dealloc,
                  module_match_repr) ||
      !ready_type(ItemsMatchType, "minidynamo.ItemsMatch",
                  "ItemsMatch(indices, types, matchers, written, distinct)(seq) -> bool: the typed TensorMatch of "
                  "each item at indices, and the items at written distinct from those at distinct",
                  sizeof(ItemsMatch), offsetof(ItemsMatch, vectorcall), items_match_new, items_match_dealloc, nullptr))
    return nullptr;
  const char* tables[3] = {"_modules", "_parameters", "_buffers"};
  const char* hooks[4] = {"_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"};
  for (int i = 0; i < 3; ++i)
    if ((kTableNames[i] = PyUnicode_InternFromString(tables[i])) == nullptr) return nullptr;
  for (int i = 0; i < 4; ++i)
    if ((kHookNames[i] = PyUnicode_InternFromString(hooks[i])) == nullptr) return nullptr;
  if ((kForward = PyUnicode_InternFromString("forward")) == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  if (!add_type(m, "GlobalState", GlobalStateType) || !add_type(m, "TensorMatch", TensorMatchType) ||
      !add_type(m, "ModuleMatch", ModuleMatchType) || !add_type(m, "ItemsMatch", ItemsMatchType)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
