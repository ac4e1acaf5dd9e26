// Issue 17 probe (not product code): DyT's eager forward and backward as a C++ autograd node
// that launches tilefuse's compiled Triton kernels through the CUDA driver, to measure whether
// host cost per call reaches F.layer_norm's. Python builds a Plan once per call plan (the
// kernels' function handles, grids and parameter lists, from triton 3.6's compiled kernels);
// per call: the allocations, a check of the pointers' alignment and the cuLaunchKernel calls,
// inside a torch::autograd::Function (the node PyTorch builds for C++ custom functions).
#include <torch/extension.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <chrono>
#include <atomic>
#include <type_traits>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <dlfcn.h>
#include <cstring>

namespace {

using torch::autograd::variable_list;

typedef int (*LaunchFn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                        void**, void**);

LaunchFn launch_fn() {
  static LaunchFn fn = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    TORCH_CHECK(h != nullptr, "dyt_node: cannot open libcuda.so.1");
    auto f = reinterpret_cast<LaunchFn>(dlsym(h, "cuLaunchKernel"));
    TORCH_CHECK(f != nullptr, "dyt_node: no cuLaunchKernel in libcuda.so.1");
    return f;
  }();
  return fn;
}

// One compiled kernel with everything but its tensors' addresses fixed. slots[i] >= 0: the
// address of tensor slots[i]; -1: a 4-byte integer values[i]; -2: an 8-byte one; -3: a null
// pointer (Triton's global and profile scratch, checked unused when the plan was built).
struct Kernel {
  int64_t function = 0;
  int64_t grid = 0, threads = 0, smem = 0;
  std::vector<int64_t> slots, values;

  void launch(void* const* ptrs, void* stream) const {
    int64_t store[32];
    void* params[32];
    const size_t n = slots.size();
    TORCH_CHECK(n <= 32, "dyt_node: too many parameters");
    for (size_t i = 0; i < n; ++i) {
      const int64_t s = slots[i];
      if (s >= 0) {
        store[i] = reinterpret_cast<int64_t>(ptrs[s]);
      } else if (s == -1) {
        const int32_t v = static_cast<int32_t>(values[i]);
        std::memcpy(&store[i], &v, 4);
      } else if (s == -2) {
        store[i] = values[i];
      } else {
        store[i] = 0;
      }
      params[i] = &store[i];
    }
    if (grid == 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    const int err = launch_fn()(reinterpret_cast<void*>(function), grid, 1, 1, threads, 1, 1, smem, stream,
                                params, nullptr);
    launch_ns[slot].fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - t0).count());
    launches[slot].fetch_add(1);
    TORCH_CHECK(err == 0, "dyt_node: cuLaunchKernel returned ", err);
  }
  // host time inside cuLaunchKernel, by kernel (0 forward, 1 backward, 2 reduction)
  int slot = 0;
  static std::atomic<int64_t> launch_ns[3], launches[3];
};
std::atomic<int64_t> Kernel::launch_ns[3], Kernel::launches[3];

struct Plan {
  Kernel fwd, bwd_main, bwd_reduce;
  int64_t wpart = 0, bpart = 0, apart = 0;   // float32 scratch sizes; bpart 0: no bias
};

void* stream_of(const at::Tensor& t) {
  static const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl->getStream(t.device()).native_handle();
}

void check_aligned(void* const* ptrs, int n) {
  uintptr_t acc = 0;
  for (int i = 0; i < n; ++i) acc |= reinterpret_cast<uintptr_t>(ptrs[i]);
  TORCH_CHECK((acc & 15) == 0, "dyt_node: the kernels were compiled for 16-byte aligned tensors");
}

// torch::autograd::Function (custom_function.h): the stable C++ API for a custom node (its
// Node type moved from shared_ptr to intrusive_ptr between torch 2.11 and 2.13).
struct DytFunction : public torch::autograd::Function<DytFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& alpha,
                            const at::Tensor& weight, const at::Tensor& b, int64_t plan_address) {
    // without a bias b is weight (a Function's tensor inputs must be defined): its gradient
    // is then returned undefined
    const Plan* plan = reinterpret_cast<const Plan*>(plan_address);
    const bool has_bias = plan->bpart != 0;
    auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
    void* ptrs[5] = {x.data_ptr(), y.data_ptr(), alpha.data_ptr(), weight.data_ptr(), b.data_ptr()};
    check_aligned(ptrs, 5);
    plan->fwd.launch(ptrs, stream_of(x));
    ctx->save_for_backward({x, alpha, weight, b});
    ctx->saved_data["plan"] = plan_address;
    return y;
  }

  static variable_list backward(torch::autograd::AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "dyt_node (probe): create_graph is not supported");
    at::Tensor dy = grads[0];
    if (!dy.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    dy = dy.contiguous();
    const Plan* plan = reinterpret_cast<const Plan*>(ctx->saved_data["plan"].toInt());
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& alpha = saved[1];
    const at::Tensor& weight = saved[2];
    const bool has_bias = plan->bpart != 0;
    auto dx = at::empty_like(x, at::MemoryFormat::Contiguous);
    auto dalpha = at::empty_like(alpha, at::MemoryFormat::Contiguous);
    auto dweight = at::empty_like(weight, at::MemoryFormat::Contiguous);
    at::Tensor dbias;
    if (has_bias) dbias = at::empty_like(saved[3], at::MemoryFormat::Contiguous);
    const auto f32 = x.options().dtype(at::kFloat);
    auto wpart = at::empty({plan->wpart}, f32);
    auto bpart = plan->bpart ? at::empty({plan->bpart}, f32) : wpart;
    auto apart = at::empty({plan->apart}, f32);
    void* stream = stream_of(x);
    void* main_ptrs[8] = {dy.data_ptr(), x.data_ptr(), dx.data_ptr(), alpha.data_ptr(), weight.data_ptr(),
                          wpart.data_ptr(), bpart.data_ptr(), apart.data_ptr()};
    check_aligned(main_ptrs, 8);
    plan->bwd_main.launch(main_ptrs, stream);
    void* reduce_ptrs[6] = {wpart.data_ptr(), bpart.data_ptr(), apart.data_ptr(), dweight.data_ptr(),
                            (has_bias ? dbias : dweight).data_ptr(), dalpha.data_ptr()};
    plan->bwd_reduce.launch(reduce_ptrs, stream);
    return {dx, dalpha, dweight, dbias, at::Tensor()};
  }
};

at::Tensor forward(const std::shared_ptr<Plan>& plan, const at::Tensor& x, const at::Tensor& alpha,
                   const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  const at::Tensor& b = bias.has_value() ? *bias : weight;
  return DytFunction::apply(x, alpha, weight, b, reinterpret_cast<int64_t>(plan.get()));
}


// The same node built by hand, as PyTorch's generated autograd code builds its own (no
// AutogradContext, no saved-data map). The node pointer type is std::shared_ptr<Node> in some
// torch releases and c10::intrusive_ptr<Node> in others: NodePtr is whichever Edge holds.
using NodePtr = std::decay_t<decltype(std::declval<torch::autograd::Edge>().function)>;
template <typename T> struct IsShared : std::false_type {};
template <typename T> struct IsShared<std::shared_ptr<T>> : std::true_type {};

struct DytBackward : public torch::autograd::Node {
  const Plan* plan = nullptr;
  torch::autograd::SavedVariable x_, alpha_, weight_, bias_;
  std::string name() const override { return "DytBackward"; }
  void release_variables() override {
    x_.reset_data();
    alpha_.reset_data();
    weight_.reset_data();
    bias_.reset_data();
  }
  variable_list apply(variable_list&& grads) override {
    const auto t0 = std::chrono::steady_clock::now();
    TORCH_CHECK(!at::GradMode::is_enabled(), "dyt_node (probe): create_graph is not supported");
    at::Tensor dy = grads[0];
    if (!dy.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    dy = dy.contiguous();
    const auto x = x_.unpack();
    const auto alpha = alpha_.unpack();
    const auto weight = weight_.unpack();
    const bool has_bias = plan->bpart != 0;
    auto dx = at::empty_like(x, at::MemoryFormat::Contiguous);
    auto dalpha = at::empty_like(alpha, at::MemoryFormat::Contiguous);
    auto dweight = at::empty_like(weight, at::MemoryFormat::Contiguous);
    at::Tensor dbias;
    if (has_bias) dbias = at::empty_like(weight, at::MemoryFormat::Contiguous);
    const auto f32 = x.options().dtype(at::kFloat);
    auto wpart = at::empty({plan->wpart}, f32);
    auto bpart = has_bias ? at::empty({plan->bpart}, f32) : wpart;
    auto apart = at::empty({plan->apart}, f32);
    void* stream = stream_of(x);
    void* main_ptrs[8] = {dy.data_ptr(), x.data_ptr(), dx.data_ptr(), alpha.data_ptr(), weight.data_ptr(),
                          wpart.data_ptr(), bpart.data_ptr(), apart.data_ptr()};
    check_aligned(main_ptrs, 8);
    plan->bwd_main.launch(main_ptrs, stream);
    void* reduce_ptrs[6] = {wpart.data_ptr(), bpart.data_ptr(), apart.data_ptr(), dweight.data_ptr(),
                            (has_bias ? dbias : dweight).data_ptr(), dalpha.data_ptr()};
    plan->bwd_reduce.launch(reduce_ptrs, stream);
    backward_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - t0).count());
    return {dx, dalpha, dweight, dbias};
  }
  static std::atomic<int64_t> backward_ns;
};
std::atomic<int64_t> DytBackward::backward_ns;

template <typename N>
NodePtr new_node() {
  if constexpr (IsShared<NodePtr>::value) {
    return NodePtr(std::make_shared<N>());
  } else {
    return NodePtr(c10::make_intrusive<N>());
  }
}

at::Tensor forward_node(const std::shared_ptr<Plan>& plan, const at::Tensor& x, const at::Tensor& alpha,
                        const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  const bool has_bias = bias.has_value() && bias->defined();
  const at::Tensor& b = has_bias ? *bias : weight;
  auto y = at::empty_like(x, at::MemoryFormat::Contiguous);
  void* ptrs[5] = {x.data_ptr(), y.data_ptr(), alpha.data_ptr(), weight.data_ptr(), b.data_ptr()};
  check_aligned(ptrs, 5);
  plan->fwd.launch(ptrs, stream_of(x));
  if (at::GradMode::is_enabled() &&
      (x.requires_grad() || alpha.requires_grad() || weight.requires_grad() || (has_bias && b.requires_grad()))) {
    NodePtr node = new_node<DytBackward>();
    auto* n = static_cast<DytBackward*>(node.get());
    n->plan = plan.get();
    n->set_next_edges(torch::autograd::collect_next_edges(x, alpha, weight, has_bias ? b : at::Tensor()));
    n->x_ = torch::autograd::SavedVariable(x, false);
    n->alpha_ = torch::autograd::SavedVariable(alpha, false);
    n->weight_ = torch::autograd::SavedVariable(weight, false);
    if (has_bias) n->bias_ = torch::autograd::SavedVariable(b, false);
    torch::autograd::set_history(y, node);
  }
  return y;
}

std::vector<int64_t> counters(bool reset) {
  std::vector<int64_t> out;
  for (int i = 0; i < 3; ++i) out.push_back(reset ? Kernel::launch_ns[i].exchange(0) : Kernel::launch_ns[i].load());
  for (int i = 0; i < 3; ++i) out.push_back(reset ? Kernel::launches[i].exchange(0) : Kernel::launches[i].load());
  out.push_back(reset ? DytBackward::backward_ns.exchange(0) : DytBackward::backward_ns.load());
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  py::class_<Kernel>(m, "Kernel")
      .def(py::init<>())
      .def_readwrite("function", &Kernel::function)
      .def_readwrite("grid", &Kernel::grid)
      .def_readwrite("threads", &Kernel::threads)
      .def_readwrite("smem", &Kernel::smem)
      .def_readwrite("slots", &Kernel::slots)
      .def_readwrite("values", &Kernel::values)
      .def_readwrite("slot", &Kernel::slot);
  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan")
      .def(py::init<>())
      .def_readwrite("fwd", &Plan::fwd)
      .def_readwrite("bwd_main", &Plan::bwd_main)
      .def_readwrite("bwd_reduce", &Plan::bwd_reduce)
      .def_readwrite("wpart", &Plan::wpart)
      .def_readwrite("bpart", &Plan::bpart)
      .def_readwrite("apart", &Plan::apart);
  m.def("forward", &forward);
  m.def("forward_node", &forward_node);
  m.def("counters", &counters);
}
