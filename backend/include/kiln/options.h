// CompileOptions: the one options type, with the same keys from C++, from a "key=value,..."
// string, from a key/value map, and (later) from Python's torch.compile(options=...).
#pragma once

#include <ATen/core/ivalue.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/export.h"

namespace kiln {

enum class Target { Auto, CPU, CUDA };

/// What convolutions and matrix products multiply in: fp32 (what eager computes), or bf16 with
/// float32 sums (inference only, on CPUs with native bf16; docs/precision.md).
enum class Precision { FP32, BF16 };

struct KILN_API CompileOptions {
  /// torch.compile's mode strings: default, reduce-overhead, max-autotune,
  /// max-autotune-no-cudagraphs.
  std::string mode = "default";
  /// auto: the device of the inputs; cpu: CPU tensors only; cuda: needs a CUDA device.
  Target target = Target::Auto;
  /// Raise instead of falling back to eager when a region fails to compile.
  bool strict = false;
  /// Fuse ops into generated kernels; false runs every op through ATen.
  bool fusion = true;
  /// Specializations (input signatures) compiled per module; past it the frozen (eval-mode) copy
  /// of the module runs in the TorchScript interpreter, uncompiled.
  int max_specializations = 8;
  /// fp32; or bf16: the convolutions and linear layers kiln runs on its oneDNN primitives take
  /// bf16 inputs and weights (weights converted once, at compile time) and sum in float32;
  /// everything else stays float32. Inference only. Where the CPU has no native bf16 (neither
  /// AVX512-BF16 nor AMX), warns once and runs fp32; with strict, raises.
  Precision precision = Precision::FP32;
  /// Write graph IR after each pass and the captured TorchScript graph here ("" = off).
  std::string dump_dir;

  /// C++ only: inputs to compile for at kiln::compile time; empty = compile on the first call.
  std::vector<c10::IValue> example_inputs;

  /// Sets one key from its string form; throws kiln::Error (invalid input) naming the key and
  /// listing the valid keys or values.
  void set(const std::string& key, const std::string& value);
  /// "mode=default,strict=true": comma-separated key=value pairs (spaces around them ignored).
  static CompileOptions parse(const std::string& text);
  static CompileOptions from_map(const std::map<std::string, std::string>& values);
  /// The keys and values in the form parse() reads (example_inputs are not included).
  std::string to_string() const;
  static const std::vector<std::string>& keys();
};

KILN_API const char* target_name(Target target);
KILN_API const char* precision_name(Precision precision);

}  // namespace kiln
