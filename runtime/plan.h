// A Plan: what a compiled graph runs per call. Ordered steps over numbered value slots, the
// frozen constants, and a memory plan for the intermediates. Immutable once built, so one Plan
// serves any number of threads at once.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "passes/ir/types.h"
#include "runtime/kernel_abi.h"

namespace kiln {

/// What a step computes, for the profiler (runtime/step_profiler.h) and explain: its class of
/// work (`convolution`, `gemm`, `attention`, `elementwise`, `reduction`, `normalization`,
/// `pooling`, `layout`, `view`, `copy`, `other`) and, for a kernel, the ops fused into it.
struct StepLabel {
  std::string category;
  std::string ops;  // "aten::add.Tensor + aten::relu"; empty for an extern step
  /// The sizes of its first input and first output, so a profile can match it to another
  /// runtime's layer.
  std::vector<int64_t> input_sizes;
  std::vector<int64_t> output_sizes;
};

/// An operator called through ATen's dispatcher (boxed), with its constant arguments already in
/// place. Code generation adds kernel steps beside these.
struct ExternStep {
  // OperatorHandle has no default constructor, so a step starts from its op and name.
  ExternStep(c10::OperatorHandle op, std::string name) : op(std::move(op)), name(std::move(name)) {}

  c10::OperatorHandle op;
  std::string name;  // for errors and explain
  StepLabel label;
  std::vector<c10::IValue> stack_template;  // constants filled, tensor positions empty
  struct TensorArg {
    int position;  // in the stack
    int value;     // slot
  };
  struct TensorListArg {
    int position;
    std::vector<int> values;  // slots; -1 is a None element (`optional`)
    bool optional = false;    // a `Tensor?[]`, passed as a list of optional tensors
  };
  std::vector<TensorArg> tensor_args;
  std::vector<TensorListArg> tensor_list_args;
  std::vector<int> outputs;  // slots, one per return
  /// When >= 0: the op is the out= variant and writes outputs[0] into its planned buffer, passed
  /// at this stack position.
  int out_position = -1;
  /// Slots whose last reader is this step: released after it so memory returns early.
  std::vector<int> release;
  /// ATen's in-place overload of `op`, which writes outputs[0] over one input (see
  /// in_place_extern.h); the executor calls it instead of `op` when that input is not shared.
  struct InPlace {
    c10::OperatorHandle op;
    std::vector<int> order;     // for each argument of `op`, its position in stack_template
    int written_position = -1;  // in stack_template: the argument written over
    int input = -1;             // its slot
  };
  std::optional<InPlace> in_place;
  /// For an op whose output shapes were found by a sample run (it has no meta kernel; the graph
  /// IR marks it with ir::kSampledShapeAttr): the shapes every call must produce; a call that
  /// produces others raises Unsupported.
  std::vector<std::vector<int64_t>> expected_sizes;
  /// Per output: its IR type where the output is a fresh tensor (not a view of an input, not
  /// written into a planned buffer), else nullopt. ATen picks a fresh output's layout from its
  /// inputs' strides, size-1 dims' included, which the IR's types leave open, and the import's
  /// meta runs can pick otherwise than the CPU kernels (a convolution down to a 1x1 map is
  /// channels-last on the CPU and contiguous on meta; an upsampling of it then differs in every
  /// dim). An output that comes back in a layout other than its type's is copied into that one,
  /// which is what the passes planned around (a `contiguous` they dropped as a no-op).
  std::vector<std::optional<ir::TensorType>> fresh_layouts;
  /// For a view op (its output aliases its one tensor input: permute, select, unflatten, ...):
  /// the output as an `as_strided` of the input, found by a meta run when the plan was built.
  /// Taken while the input has the layout it was built for; a boxed call through the dispatcher
  /// costs several times what the view itself does, and small models make many.
  struct View {
    ir::TensorType input;
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    int64_t offset = 0;  // elements past the input's own storage offset
  };
  std::optional<View> view;
};

/// A generated kernel: reads its input slots, writes its output slots.
struct KernelStep {
  std::string name;  // for errors and explain
  StepLabel label;
  CompiledKernel kernel;
  std::vector<int> inputs;
  /// Byte offsets in the arena of planned inputs and outputs (-1: not planned): the kernel gets
  /// a pointer into the arena and no tensor is made for them.
  std::vector<int64_t> input_offsets;
  std::vector<int64_t> output_offsets;
  /// The layouts the kernel was compiled for; an input that arrives otherwise is copied into
  /// this layout first (ATen may return a different layout than its meta kernel promised).
  std::vector<ir::TensorType> input_types;
  std::vector<int> outputs;
  std::vector<ir::TensorType> output_types;
  std::vector<int> release;
};

using Step = std::variant<ExternStep, KernelStep>;

struct PlannedBuffer {
  int value;
  int64_t offset;  // bytes into the arena
  ir::TensorType type;
  bool needs_tensor = true;  // an extern step reads or writes it (kernels take raw pointers)
};

struct Plan {
  int num_values = 0;
  std::vector<int> inputs;   // slots of the graph inputs
  std::vector<int> outputs;  // slots of the graph outputs
  std::vector<std::pair<int, at::Tensor>> constants;
  std::vector<Step> steps;
  /// The generated code the kernel steps call into; it lives as long as the plan.
  std::shared_ptr<void> code;
  std::vector<PlannedBuffer> planned;
  int64_t arena_bytes = 0;
  int64_t unshared_bytes = 0;
  /// Kernel outputs written over an input that dies there (see passes/plan_memory.h).
  int in_place_writes = 0;
  /// Layout conversions assign_layout inserted (channels-last in, back at the boundary).
  int layout_conversions = 0;
  /// Where the arena lives: the device of the inputs.
  c10::Device device = c10::Device(c10::DeviceType::CPU);
};

}  // namespace kiln
