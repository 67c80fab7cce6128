#include "runtime/executor.h"

#include <ATen/ATen.h>
#include <c10/core/Stream.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <optional>

#include "kiln/error.h"
#include "runtime/bounds_check.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/in_place_extern.h"
#include "runtime/output_pool.h"
#include "runtime/parallel.h"
#include "runtime/step_profiler.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Waits for the work queued on `device` (a GPU step is timed to its end, not its launch).
void synchronize(c10::Device device) {
  if (device.is_cpu()) return;
  const auto* guard = c10::impl::getDeviceGuardImpl(device.type());
  guard->synchronizeDevice(device.has_index() ? device.index() : guard->getDevice().index());
}

// A tensor over `arena`'s storage at a planned offset. It shares the arena's storage, so the
// arena lives as long as any such tensor does.
at::Tensor planned_tensor(const at::Tensor& arena, const PlannedBuffer& buffer) {
  const at::ScalarType dtype = to_aten_dtype(buffer.type.dtype);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(arena.storage()), arena.key_set(),
                                                   c10::scalarTypeToTypeMeta(dtype));
  impl->set_sizes_and_strides(buffer.type.sizes, buffer.type.strides,
                              buffer.offset / static_cast<int64_t>(c10::elementSize(dtype)));
  return at::Tensor(std::move(impl));
}

// On the CPU from the output pool: a large output per call would otherwise cost page faults.
at::Tensor empty_like_type(const ir::TensorType& type, c10::Device device) {
  if (device.is_cpu()) return pooled_empty(type);
  return at::empty_strided(type.sizes, type.strides,
                           at::TensorOptions().dtype(to_aten_dtype(type.dtype)).device(device));
}

// A view step's output straight from its input's storage (see ExternStep::View). Not for an
// input that records autograd history: the view op's own backward is the one to record.
bool run_view(const ExternStep& step, std::vector<at::Tensor>& slots) {
  const at::Tensor& input = slots[step.tensor_args[0].value];
  if (!input.defined() || !has_layout(input, step.view->input) ||
      (input.requires_grad() && at::GradMode::is_enabled())) {
    return false;
  }
  slots[step.outputs[0]] = input.as_strided(step.view->sizes, step.view->strides,
                                            input.storage_offset() + step.view->offset);
  for (int v : step.release)
    slots[v].reset();
  return true;
}

// See ExternStep::fresh_layouts: a copy only where ATen chose another layout than the IR's.
// Returns the seconds it took when `timed` (else 0).
double conform_to_layouts(const ExternStep& step, std::vector<at::Tensor>& slots, bool timed) {
  double seconds = 0;
  for (size_t i = 0; i < step.fresh_layouts.size(); ++i) {
    const std::optional<ir::TensorType>& type = step.fresh_layouts[i];
    at::Tensor& out = slots[step.outputs[i]];
    if (!type || !out.defined() || out.sizes() != c10::IntArrayRef(type->sizes) ||
        has_layout(out, *type)) {
      continue;
    }
    const Clock::time_point start = timed ? Clock::now() : Clock::time_point{};
    out = empty_like_type(*type, out.device()).copy_(out);
    if (timed) {
      synchronize(out.device());
      seconds += seconds_since(start);
    }
  }
  return seconds;
}

// Returns the seconds spent re-laying out outputs when `timed` (else 0).
double run_extern(const ExternStep& step, std::vector<at::Tensor>& slots,
                  std::vector<c10::IValue>& stack, bool timed) {
  if (step.view && run_view(step, slots)) return 0;
  // Checked before the stack takes its own references.
  const bool in_place = step.in_place && is_sole_owner(slots[step.in_place->input]);
  stack = step.stack_template;
  for (const auto& arg : step.tensor_args)
    stack[arg.position] = slots[arg.value];
  for (const auto& list_arg : step.tensor_list_args) {
    if (list_arg.optional) {
      c10::List<std::optional<at::Tensor>> list;
      list.reserve(list_arg.values.size());
      for (int v : list_arg.values)
        list.push_back(v < 0 ? std::nullopt : std::optional<at::Tensor>(slots[v]));
      stack[list_arg.position] = std::move(list);
      continue;
    }
    c10::List<at::Tensor> list;
    list.reserve(list_arg.values.size());
    for (int v : list_arg.values)
      list.push_back(slots[v]);
    stack[list_arg.position] = std::move(list);
  }
  if (step.out_position >= 0) stack[step.out_position] = slots[step.outputs[0]];
  if (in_place) {
    std::vector<c10::IValue> reordered;
    reordered.reserve(stack.size());
    for (int position : step.in_place->order)
      reordered.push_back(std::move(stack[position]));
    // The slot's own reference goes, so the op's output is the tensor's only owner.
    slots[step.in_place->input].reset();
    stack = std::move(reordered);
  }
  try {
    (in_place ? step.in_place->op : step.op).callBoxed(stack);
  } catch (const c10::Error& e) {
    // The region runner decides whose error it is: it reruns the call without kiln, and only
    // if that fails too is it the user's (raised as the fallback raises it).
    throw Error(ErrorKind::Internal, step.name + " failed: " + e.what_without_backtrace());
  }
  if (step.out_position < 0) {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      slots[step.outputs[i]] = stack[i].isNone() ? at::Tensor() : std::move(stack[i]).toTensor();
    }
  }
  for (size_t i = 0; i < step.expected_sizes.size(); ++i) {
    const at::Tensor& out = slots[step.outputs[i]];
    if (!out.defined() || out.sizes() != c10::IntArrayRef(step.expected_sizes[i])) {
      throw Error(ErrorKind::Unsupported, step.name +
                                              " returned a shape other than the one its "
                                              "sample run gave at compile time");
    }
  }
  const double relayout_seconds = conform_to_layouts(step, slots, timed);
  for (int v : step.release)
    slots[v].reset();
  return relayout_seconds;
}

// The arena of the plan running on this thread, reused from call to call: allocating it costs
// more than a small plan's kernels. A nested call on the same thread (never made by kiln itself)
// gets a fresh one.
class ArenaLease {
 public:
  ArenaLease(int64_t bytes, c10::Device device) {
    Cache& cache = cache_for_thread();
    if (device.is_cpu() && !cache.busy) {
      if (!cache.arena.defined() || cache.arena.numel() < bytes)
        cache.arena = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
      cache.busy = true;
      cache_ = &cache;
      arena_ = cache.arena;
    } else {
      arena_ = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
    }
  }
  ~ArenaLease() {
    if (cache_) cache_->busy = false;
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;

  const at::Tensor& tensor() const { return arena_; }
  char* data() const { return static_cast<char*>(arena_.data_ptr()); }

 private:
  struct Cache {
    at::Tensor arena;
    bool busy = false;
  };
  static Cache& cache_for_thread() {
    thread_local Cache cache;
    return cache;
  }
  Cache* cache_ = nullptr;
  at::Tensor arena_;
};

void run_on_cpu(const KernelStep& step, std::vector<void*>& pointers) {
  // A split reduction's partial results: one per piece, row and reduction (up to a few hundred
  // KB for a reduction with many rows), in this thread's buffer kept from call to call. No call
  // of another kernel on this thread comes between add_workspace and run_finish.
  thread_local std::vector<int64_t> workspace;
  const CompiledKernel& kernel = step.kernel;
  if (kernel.finish) add_workspace(*kernel.finish, workspace, pointers);
  void* const* buffers = pointers.data();
  run_parallel(kernel.range, kernel.grain,
               [&, sizes = kernel.size_values.data()](int64_t begin, int64_t end) {
                 kernel.function(buffers, sizes, begin, end);
               });
  if (kernel.finish) run_finish(*kernel.finish, pointers);
}

// Queued on PyTorch's current stream of the device (c10's device guard interface gives its
// native handle without linking any CUDA library), so it is ordered with ATen's kernels and the
// call never waits for the GPU. Memory freed after the launch (input copies, the workspace) goes
// back to the caching allocator, which reuses it only for work queued later on the same stream.
void launch_on_current_stream(const DeviceKernel& kernel, std::vector<void*>& pointers,
                              c10::Device device) {
  at::Tensor workspace;
  if (kernel.workspace_bytes() > 0) {
    workspace =
        at::zeros({kernel.workspace_bytes()}, at::TensorOptions().dtype(at::kByte).device(device));
    pointers.push_back(workspace.data_ptr());
  }
  const auto* guard = c10::impl::getDeviceGuardImpl(device.type());
  if (!device.has_index()) device = guard->getDevice();
  kernel.launch(pointers, device.index(), guard->getStream(device).native_handle());
}

// `arena` null: a checked run (bounds_check.h), where every planned value has a tensor of its own
// in its slot, and `guarded` allocates the kernel's other outputs. Returns the seconds spent
// re-laying out inputs when `timed` (else 0).
double run_kernel(const KernelStep& step, std::vector<at::Tensor>& slots,
                  std::vector<void*>& pointers, c10::Device device, char* arena,
                  GuardedBuffers* guarded, bool timed) {
  pointers.clear();
  std::vector<at::Tensor> copies;  // inputs re-laid out for the kernel, alive until it returns
  double relayout_seconds = 0;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (step.input_offsets[i] >= 0 && arena) {
      pointers.push_back(arena + step.input_offsets[i]);
      continue;
    }
    const at::Tensor& input = slots[step.inputs[i]];
    if (has_layout(input, step.input_types[i])) {
      pointers.push_back(input.data_ptr());
      continue;
    }
    const Clock::time_point start = timed ? Clock::now() : Clock::time_point{};
    copies.push_back(empty_like_type(step.input_types[i], device).copy_(input));
    pointers.push_back(copies.back().data_ptr());
    if (timed) {
      synchronize(device);
      relayout_seconds += seconds_since(start);
    }
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    at::Tensor& output = slots[step.outputs[i]];
    if (step.output_offsets[i] >= 0) {
      pointers.push_back(arena ? arena + step.output_offsets[i] : output.data_ptr());
      continue;
    }
    output = guarded ? guarded->allocate(step.output_types[i], device,
                                         "output " + std::to_string(i) + " of " + step.name)
                     : empty_like_type(step.output_types[i], device);
    pointers.push_back(output.data_ptr());
  }
  if (step.kernel.device_kernel) {
    launch_on_current_stream(*step.kernel.device_kernel, pointers, device);
  } else {
    run_on_cpu(step, pointers);
  }
  for (int v : step.release)
    slots[v].reset();
  return relayout_seconds;
}

// One step, timed into `profiler` when a profiling session is open. The re-layout copies before a
// kernel count apart from it.
void run_step(const Plan& plan, size_t index, std::vector<at::Tensor>& slots,
              std::vector<void*>& pointers, std::vector<c10::IValue>& stack, char* arena,
              GuardedBuffers* guarded, StepProfiler* profiler) {
  const Step& step = plan.steps[index];
  const Clock::time_point start = profiler ? Clock::now() : Clock::time_point{};
  double relayout_seconds = 0;
  if (const auto* kernel = std::get_if<KernelStep>(&step)) {
    relayout_seconds = run_kernel(*kernel, slots, pointers, plan.device, arena, guarded, profiler);
  } else {
    relayout_seconds = run_extern(std::get<ExternStep>(step), slots, stack, profiler);
  }
  if (!profiler) return;
  synchronize(plan.device);
  profiler->record(plan, index, false, seconds_since(start) - relayout_seconds);
  if (relayout_seconds > 0) profiler->record(plan, index, true, relayout_seconds);
}

}  // namespace

std::vector<at::Tensor> run_plan(const Plan& plan, const std::vector<at::Tensor>& inputs,
                                 bool check_bounds) {
  std::vector<at::Tensor> slots(plan.num_values);
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    slots[plan.inputs[i]] = inputs[i];
  for (const auto& [slot, tensor] : plan.constants)
    slots[slot] = tensor;

  // Calls on other threads never share intermediates: each thread has its own arena.
  std::optional<ArenaLease> arena;
  std::optional<GuardedBuffers> guarded;
  char* arena_data = nullptr;
  if (check_bounds) {
    guarded.emplace();
    for (const auto& buffer : plan.planned) {
      slots[buffer.value] = guarded->allocate(buffer.type, plan.device,
                                              "planned value %" + std::to_string(buffer.value));
    }
  } else if (!plan.planned.empty()) {
    arena.emplace(plan.arena_bytes, plan.device);
    arena_data = arena->data();
    for (const auto& buffer : plan.planned) {
      if (buffer.needs_tensor) slots[buffer.value] = planned_tensor(arena->tensor(), buffer);
    }
  }

  std::vector<c10::IValue> stack;
  std::vector<void*> pointers;
  StepProfiler* profiler = StepProfiler::active();
  if (profiler) synchronize(plan.device);  // the first step's time is its own
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    run_step(plan, i, slots, pointers, stack, arena_data, guarded ? &*guarded : nullptr, profiler);
    // Extern steps too: some are kiln's own code (the Winograd convolution).
    if (guarded) {
      guarded->check_after(std::visit([](const auto& s) { return s.name; }, plan.steps[i]));
    }
  }

  std::vector<at::Tensor> outputs;
  outputs.reserve(plan.outputs.size());
  for (int v : plan.outputs)
    outputs.push_back(slots[v]);
  return outputs;
}

}  // namespace kiln
