#include "backend/codegen/cuda/cuda_emitter.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "backend/codegen/cuda/cuda_c.h"
#include "backend/codegen/cuda/cuda_prelude.h"
#include "kiln/error.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/size_guards.h"
#include "passes/kernel/size_terms.h"

namespace kiln::codegen::cuda {
namespace {

using kernel::DType;
using kernel::Expr;
using kernel::IndexMap;
using kernel::Kernel;
using kernel::Op;
using kernel::ReduceKind;

class Emitter {
 public:
  Emitter(const Kernel& kernel, const CudaSchedule& schedule, std::string entry)
      : k_(kernel),
        s_(schedule),
        entry_(std::move(entry)),
        element_(kernel::element_levels(kernel)),
        generic_(kernel::is_size_generic(kernel)) {}

  std::string emit() {
    idx_ = s_.index32 ? "int" : "long long";
    signature();
    if (k_.reduce_rank == 0) {
      if (s_.vector > 1) vector_loop();
      scalar_loop();
    } else {
      reduction();
    }
    out_ << "}\n";
    phase_entries();
    return out_.str();
  }

 private:
  // ---- the function and its parameters ---------------------------------------------------

  bool in_place(int buffer) const {
    for (const auto& [in, out] : k_.in_place)
      if (in == buffer || out == buffer) return true;
    return false;
  }

  /// The parameters: every buffer, then the workspace of a split reduction, then a
  /// size-generic kernel's size inputs size0, size1, ...
  std::string parameters() const {
    std::string text;
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const auto& b = k_.buffers[i];
      text += std::string(i ? ", " : "") + (b.is_output ? "" : "const ") + storage_type(b.dtype) +
              "* " + (in_place(static_cast<int>(i)) ? "" : "__restrict__ ") + b.name;
    }
    if (s_.slices > 1) text += ", unsigned char* __restrict__ workspace";
    for (const std::string& size : size_parameters())
      text += ", const long long " + size;
    return text;
  }

  std::vector<std::string> size_parameters() const {
    std::vector<std::string> names;
    if (generic_) {
      for (size_t i = 0; i < k_.size_inputs.size(); ++i)
        names.push_back(size_input(static_cast<int>(i)));
    }
    return names;
  }

  std::string global_function(const std::string& name) const {
    return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(s_.block) + ")\n" +
           name + "(" + parameters() + ")";
  }

  /// A kernel of several phases is one device function taking the phase, called by one
  /// __global__ function per phase (phase_entries()).
  void signature() {
    if (s_.phases > 1) {
      out_ << "__device__ __forceinline__ void " << entry_ << "_body(" << parameters()
           << ", const int phase) {\n";
    } else {
      out_ << global_function(entry_) << " {\n";
    }
  }

  void phase_entries() {
    if (s_.phases <= 1) return;
    std::string arguments;
    for (const auto& b : k_.buffers)
      arguments += b.name + ", ";
    arguments += "workspace";
    for (const std::string& size : size_parameters())
      arguments += ", " + size;
    for (int p = 0; p < s_.phases; ++p) {
      out_ << global_function(phase_entry(entry_, p)) << " {\n  " << entry_ << "_body(" << arguments
           << ", " << p << ");\n}\n";
    }
  }

  // ---- indexing ---------------------------------------------------------------------------

  /// A size, stride or offset in the code: its value, or for a term of a size-generic kernel
  /// its expression over the size parameters (evaluated in 64 bits, then in the index type).
  std::string integer(const kernel::SizeTerm& term) const {
    if (term.factors.empty()) return std::to_string(term.coefficient + term.constant);
    std::string text = term.coefficient == 1 ? "" : std::to_string(term.coefficient) + "LL";
    for (size_t k = 0; k < term.factors.size(); ++k) {
      const kernel::FactorForm form = kernel::form_of(term, k);
      std::string factor = size_input(term.factors[k]);
      if (form.scale != 1) factor = std::to_string(form.scale) + "LL * " + factor;
      if (form.shift != 0)
        factor = "(" + factor + (form.shift > 0 ? " + " : " - ") +
                 std::to_string(std::llabs(form.shift)) + "LL)";
      text += (text.empty() ? "" : " * ") + factor;
    }
    if (term.constant != 0)
      text +=
          (term.constant > 0 ? " + " : " - ") + std::to_string(std::llabs(term.constant)) + "LL";
    return "static_cast<" + idx_ + ">(" + text + ")";
  }

  static std::string size_input(int i) { return "size" + std::to_string(i); }

  std::string size(int d) const { return integer(kernel::size_term(k_, d)); }

  /// The product of the sizes of dims [first, last): a number, or an expression where one of
  /// them follows the size inputs.
  std::string extent(int first, int last) const {
    int64_t constant = 1;
    std::string text;
    for (int d = first; d < last; ++d) {
      const kernel::SizeTerm term = kernel::size_term(k_, d);
      if (term.factors.empty()) {
        constant *= k_.sizes[d];
      } else {
        text += (text.empty() ? "" : " * ") + integer(term);
      }
    }
    if (text.empty()) return std::to_string(constant);
    return "(" + (constant == 1 ? text : std::to_string(constant) + " * " + text) + ")";
  }

  std::string numel_code() const { return extent(0, k_.rank()); }
  std::string rows_code() const { return extent(0, k_.row_rank()); }
  std::string row_size_code() const { return extent(k_.row_rank(), k_.rank()); }

  /// Element offset of `map` from the coordinates c<d> (dims with stride 0 are not read).
  std::string offset(const IndexMap& map) const {
    std::string text = integer(kernel::term_or_constant(map.offset_term, map.offset));
    for (int d = 0; d < k_.rank(); ++d) {
      const kernel::SizeTerm stride = kernel::stride_term(map, d);
      if (stride.factors.empty() && map.strides[d] == 0) continue;
      text += " + c" + std::to_string(d) + " * " + integer(stride);
    }
    return "(" + text + ")";
  }

  /// Declares c<first>..c<last-1> from the flat index `flat` over those dims.
  void coordinates(const std::string& indent, const std::string& flat, int first, int last) {
    if (first >= last) return;
    out_ << indent << idx_ << " rem = " << flat << ";\n";
    for (int d = last - 1; d > first; --d) {
      out_ << indent << "const " << idx_ << " c" << d << " = rem % " << size(d) << ";\n"
           << indent << "rem /= " << size(d) << ";\n";
    }
    out_ << indent << "const " << idx_ << " c" << first << " = rem;\n";
  }

  // ---- values -----------------------------------------------------------------------------

  std::string v(int id) const { return "v" + std::to_string(id); }

  /// How a Load expr reads its element (the vector path reads from registers instead).
  using LoadCode = std::function<std::string(int id, const Expr&)>;

  std::string direct_load(const Expr& e) const {
    const auto& b = k_.buffers[e.map.buffer];
    return from_storage(b.name + "[" + offset(e.map) + "]", b.dtype);
  }

  std::string compute(int id, const LoadCode& load) const {
    const Expr& e = k_.exprs[id];
    auto a = [&](int k) { return v(e.args[k]); };
    auto arg_type = [&](int k) { return k_.exprs[e.args[k]].dtype; };
    const DType t = e.dtype;
    switch (e.op) {
      case Op::Load:
        return load(id, e);
      case Op::Constant:
        // A size as a value (a KV cache's length as a position): the term, converted as an
        // int64 is.
        if (e.constant_term && generic_)
          return convert("static_cast<long long>(" + integer(*e.constant_term) + ")", DType::Int64,
                         t);
        return constant(e.constant, t);
      case Op::Cast:
        return convert(a(0), arg_type(0), t);
      case Op::Where:
        return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
      case Op::Reduce:
        unsupported("a reduction outside a reducing kernel");
      default:
        break;
    }
    if (kernel::is_comparison(e.op)) {
      static const char* const symbols[] = {"==", "!=", "<", "<=", ">", ">="};
      const int which = static_cast<int>(e.op) - static_cast<int>(Op::Eq);
      return "(" + a(0) + " " + symbols[which] + " " + a(1) + ")";
    }
    if (is_float(t)) return rounded(float_op(e, a(0), e.args.size() > 1 ? a(1) : ""), t);
    return int_op(e, a(0), e.args.size() > 1 ? a(1) : "");
  }

  void define(const std::string& indent, int id, const LoadCode& load) {
    out_ << indent << "const " << value_type(k_.exprs[id].dtype) << " " << v(id) << " = "
         << compute(id, load) << ";\n";
  }

  /// The stored form of store `s`'s value, converted to its buffer's dtype.
  std::string stored_value(const kernel::Store& s) const {
    const DType to = k_.buffers[s.map.buffer].dtype;
    return to_storage(convert(v(s.value), k_.exprs[s.value].dtype, to), to);
  }

  // ---- elementwise kernels ----------------------------------------------------------------

  std::string grid_stride(const std::string& var, const std::string& end) const {
    return "for (" + idx_ + " " + var + " = static_cast<" + idx_ +
           ">(blockIdx.x) * blockDim.x + "
           "threadIdx.x; " +
           var + " < " + end + "; " + var + " += static_cast<" + idx_ +
           ">(gridDim.x) * blockDim.x)";
  }

  void scalar_loop() {
    out_ << "  " << grid_stride("i", numel_code()) << " {\n";
    coordinates("    ", "i", 0, k_.rank());
    const LoadCode load = [&](int, const Expr& e) { return direct_load(e); };
    for (size_t id = 0; id < k_.exprs.size(); ++id)
      define("    ", static_cast<int>(id), load);
    for (const auto& s : k_.stores) {
      out_ << "    " << k_.buffers[s.map.buffer].name << "[" << offset(s.map)
           << "] = " << stored_value(s) << ";\n";
    }
    out_ << "  }\n";
  }

  /// The unsigned type of `bytes` bytes that one vector access moves.
  static std::string vector_type(int64_t bytes) {
    switch (bytes) {
      case 16:
        return "uint4";
      case 8:
        return "uint2";
      case 4:
        return "unsigned int";
      case 2:
        return "unsigned short";
      default:
        return "unsigned char";
    }
  }

  bool contiguous(const IndexMap& map) const { return map.strides[k_.rank() - 1] == 1; }

  void vector_loop() {
    const int width = s_.vector;
    // The 16-byte path runs when every contiguous buffer is aligned to its access size.
    std::string misaligned;
    std::vector<bool> seen(k_.buffers.size(), false);
    auto check = [&](const IndexMap& m) {
      if (!contiguous(m) || seen[m.buffer]) return;
      seen[m.buffer] = true;
      const int64_t bytes = width * storage_size(k_.buffers[m.buffer].dtype);
      misaligned += std::string(misaligned.empty() ? "" : " || ") +
                    "(reinterpret_cast<unsigned long long>(" + k_.buffers[m.buffer].name + ") % " +
                    std::to_string(bytes) + ")";
    };
    for (const Expr& e : k_.exprs)
      if (e.op == Op::Load) check(e.map);
    for (const auto& s : k_.stores)
      check(s.map);
    // Steps of `width` elements: a number, or at a size-generic kernel's binding an expression.
    const std::string steps =
        generic_ ? numel_code() + " / " + std::to_string(width)
                 : std::to_string(kernel::extent_value(k_, kernel::Extent::Elements) / width);
    out_ << "  if (!(" << misaligned << ")) {\n"
         << "    " << grid_stride("g", steps) << " {\n";
    coordinates("      ", "g * " + std::to_string(width), 0, k_.rank());
    auto access = [&](const IndexMap& m) {
      const auto& b = k_.buffers[m.buffer];
      return "*reinterpret_cast<" + std::string(b.is_output ? "" : "const ") +
             vector_type(width * storage_size(b.dtype)) + "*>(" + b.name + " + " + offset(m) + ")";
    };
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      const Expr& e = k_.exprs[id];
      if (e.op != Op::Load || !contiguous(e.map)) continue;
      const auto& b = k_.buffers[e.map.buffer];
      const std::string lanes = "l" + std::to_string(id);
      out_ << "      " << storage_type(b.dtype) << " " << lanes << "[" << width << "];\n"
           << "      *reinterpret_cast<" << vector_type(width * storage_size(b.dtype)) << "*>("
           << lanes << ") = " << access(e.map) << ";\n";
    }
    for (size_t i = 0; i < k_.stores.size(); ++i) {
      const auto& b = k_.buffers[k_.stores[i].map.buffer];
      out_ << "      " << storage_type(b.dtype) << " s" << i << "[" << width << "];\n";
    }
    out_ << "      #pragma unroll\n"
         << "      for (int lane = 0; lane < " << width << "; ++lane) {\n";
    const LoadCode load = [&](int id, const Expr& e) {
      if (!contiguous(e.map)) return direct_load(e);
      return from_storage("l" + std::to_string(id) + "[lane]", k_.buffers[e.map.buffer].dtype);
    };
    for (size_t id = 0; id < k_.exprs.size(); ++id)
      define("        ", static_cast<int>(id), load);
    for (size_t i = 0; i < k_.stores.size(); ++i)
      out_ << "        s" << i << "[lane] = " << stored_value(k_.stores[i]) << ";\n";
    out_ << "      }\n";
    for (size_t i = 0; i < k_.stores.size(); ++i) {
      const auto& b = k_.buffers[k_.stores[i].map.buffer];
      out_ << "      " << access(k_.stores[i].map) << " = *reinterpret_cast<const "
           << vector_type(width * storage_size(b.dtype)) << "*>(s" << i << ");\n";
    }
    out_ << "    }\n    return;\n  }\n";
  }

  // ---- reducing kernels -------------------------------------------------------------------

  static std::string accumulator_type(DType t) {
    if (t == DType::Float64) return "double";
    if (is_float(t)) return "float";
    return "long long";
  }

  static std::string combiner(ReduceKind kind) {
    switch (kind) {
      case ReduceKind::Max:
        return "kiln_max()";
      case ReduceKind::Min:
        return "kiln_min()";
      default:
        return "kiln_sum()";
    }
  }

  static std::string identity(ReduceKind kind, const std::string& acc) {
    const bool floating = acc != "long long";
    const bool dbl = acc == "double";
    switch (kind) {
      case ReduceKind::Max:
        return floating ? (dbl ? "-KILN_DINF" : "-KILN_INF") : "(-0x7fffffffffffffffLL - 1)";
      case ReduceKind::Min:
        return floating ? (dbl ? "KILN_DINF" : "KILN_INF") : "0x7fffffffffffffffLL";
      default:
        return floating ? (dbl ? "0.0" : "0.0f") : "0LL";
    }
  }

  /// The reduce's value from the combined accumulator `acc`.
  std::string finish_reduce(const Expr& e, const std::string& acc) const {
    const DType t = e.dtype;
    const std::string n = row_size_code();
    if (e.reduce == ReduceKind::Mean) {
      if (is_float(t))
        return rounded(acc + " / static_cast<" + accumulator_type(t) + ">(" + n + ")", t);
      return convert("static_cast<double>(" + acc + ") / " + n, DType::Float64, t);
    }
    if (is_float(t)) return rounded(acc, t);
    return "static_cast<" + value_type(t) + ">(" + acc + ")";
  }

  /// Every element-level expr before `end`, inside an element loop. With a row cache, a load an
  /// earlier walk made comes from the thread's registers, and a new one is kept there.
  void element_exprs(const std::string& indent, int end) {
    const LoadCode load = [&](int id, const Expr& e) {
      return s_.cached && id < walked_ ? "r" + std::to_string(id) + "[j]" : direct_load(e);
    };
    for (int id = 0; id < end; ++id) {
      if (!element_[id]) continue;
      define(indent, id, load);
      if (s_.cached && id >= walked_ && k_.exprs[id].op == Op::Load)
        out_ << indent << "r" << id << "[j] = " << v(id) << ";\n";
    }
    walked_ = std::max(walked_, end);
  }

  /// With a row cache: one register array per element-level load, per row.
  void declare_row_cache() {
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      if (!element_[id] || k_.exprs[id].op != Op::Load) continue;
      out_ << "    " << value_type(k_.exprs[id].dtype) << " r" << id << "[" << s_.cached << "];\n";
    }
  }

  /// Row-level exprs before `end` not yet defined (none of them a Reduce).
  void row_exprs(int end) {
    const LoadCode load = [&](int, const Expr& e) { return direct_load(e); };
    for (; next_row_expr_ < end; ++next_row_expr_) {
      const int id = next_row_expr_;
      if (element_[id] || k_.exprs[id].op == Op::Reduce) continue;
      define("    ", id, load);
    }
  }

  /// Opens a loop over this thread's elements of the row; close_element_loop() ends it.
  void element_loop(const std::string& first, const std::string& end, const std::string& step) {
    if (s_.cached) {
      // Unrolled, so the row cache's arrays stay in registers.
      out_ << "      #pragma unroll\n"
           << "      for (int j = 0; j < " << s_.cached << "; ++j) {\n"
           << "      const " << idx_ << " e = " << first << " + j * " << step << ";\n"
           << "      if (e < " << end << ") {\n";
    } else {
      out_ << "      for (" << idx_ << " e = " << first << "; e < " << end << "; e += " << step
           << ") {\n";
    }
    coordinates("        ", "e", k_.row_rank(), k_.rank());
  }

  void close_element_loop() { out_ << (s_.cached ? "      }}\n" : "      }\n"); }

  /// This thread's part of a walk for Reduce `id`: its elements [first, end) by `step`, each
  /// folded into `acc` (declared by the caller).
  void fold_elements(int id, const std::string& first, const std::string& end,
                     const std::string& step) {
    const Expr& e = k_.exprs[id];
    element_loop(first, end, step);
    element_exprs("        ", id);
    out_ << "        acc = " << combiner(e.reduce) << "(acc, static_cast<"
         << accumulator_type(e.dtype) << ">(" << v(e.args[0]) << "));\n";
    close_element_loop();
  }

  /// The walk that stores this thread's elements [first, end) by `step`.
  void store_elements(const std::string& first, const std::string& end, const std::string& step) {
    element_loop(first, end, step);
    element_exprs("        ", static_cast<int>(k_.exprs.size()));
    for (const auto& st : k_.stores) {
      if (!kernel::stores_per_element(k_, st)) continue;
      out_ << "        " << k_.buffers[st.map.buffer].name << "[" << offset(st.map)
           << "] = " << stored_value(st) << ";\n";
    }
    close_element_loop();
  }

  /// Across rows (cuda_schedule.h): lane l of each warp takes row l of a tile of neighbouring
  /// rows, so a warp's loads of one reduced element are neighbours in memory; the warps of the
  /// block split the reduced elements (warp g takes g, g + groups, ...) and their partial
  /// results meet in shared memory, combined in warp order.
  void reduction_across_rows() {
    const std::string rows = rows_code();
    const std::string tile_rows = std::to_string(kTileRows);
    const std::string groups = std::to_string(s_.block / kTileRows);
    const std::string row_size = row_size_code();
    // The tiles: the schedule's count, or at a size-generic kernel's binding the rows' tiles.
    const std::string tiles =
        generic_ ? "(" + rows + " + " + std::to_string(kTileRows - 1) + ") / " + tile_rows
                 : std::to_string(s_.blocks);
    out_ << "  __shared__ long long kiln_tile[" << s_.block << "];\n"
         << "  const int lane = threadIdx.x % " << tile_rows << ";\n"
         << "  const int group = threadIdx.x / " << tile_rows << ";\n"
         << "  for (" << idx_ << " tile = blockIdx.x; tile < " << tiles
         << "; tile += gridDim.x) {\n"
         << "    // Lanes past the last row work on the last row and store nothing.\n"
         << "    const bool active = tile * " << tile_rows << " + lane < " << rows << ";\n"
         << "    const " << idx_ << " row = active ? tile * " << tile_rows << " + lane : " << rows
         << " - 1;\n";
    coordinates("    ", "row", 0, k_.row_rank());
    walked_ = 0;
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      const Expr& e = k_.exprs[id];
      if (e.op != Op::Reduce) continue;
      row_exprs(static_cast<int>(id));
      const std::string acc_type = accumulator_type(e.dtype);
      const std::string partials = "reinterpret_cast<" + acc_type + "*>(kiln_tile)";
      out_ << "    " << value_type(e.dtype) << " " << v(static_cast<int>(id)) << ";\n"
           << "    {\n"
           << "      " << acc_type << " acc = " << identity(e.reduce, acc_type) << ";\n";
      fold_elements(static_cast<int>(id), "group", row_size, groups);
      out_ << "      __syncthreads();  // every thread has read the previous partials\n"
           << "      " << partials << "[threadIdx.x] = acc;\n"
           << "      __syncthreads();\n"
           << "      acc = " << partials << "[lane];\n"
           << "      for (int g = 1; g < " << groups << "; ++g) acc = " << combiner(e.reduce)
           << "(acc, " << partials << "[g * " << tile_rows << " + lane]);\n"
           << "      " << v(static_cast<int>(id)) << " = " << finish_reduce(e, "acc") << ";\n"
           << "    }\n";
    }
    row_exprs(static_cast<int>(k_.exprs.size()));
    bool element_stores = false;
    for (const auto& st : k_.stores) {
      if (kernel::stores_per_element(k_, st)) {
        element_stores = true;
        continue;
      }
      out_ << "    if (active && group == 0) " << k_.buffers[st.map.buffer].name << "["
           << offset(st.map) << "] = " << stored_value(st) << ";\n";
    }
    if (element_stores) {
      out_ << "    if (active) {\n";
      store_elements("group", row_size, groups);
      out_ << "    }\n";
    }
    out_ << "  }\n";
  }

  void reduction() {
    if (s_.across_rows) {
      reduction_across_rows();
      return;
    }
    const int row_rank = k_.row_rank();
    const bool split = s_.slices > 1;
    const std::string rows = rows_code();
    const std::string row_size = row_size_code();
    out_ << "  __shared__ long long kiln_shared[32];\n";
    if (split) out_ << "  __shared__ bool kiln_last;\n";
    const std::string items = split ? std::to_string(k_.num_rows() * s_.slices) : rows;
    out_ << "  for (" << idx_ << " item = blockIdx.x; item < " << items
         << "; item += gridDim.x) {\n";
    if (split) {
      out_ << "    const " << idx_ << " row = item / " << s_.slices << ";\n"
           << "    const " << idx_ << " slice = item % " << s_.slices << ";\n";
    } else {
      out_ << "    const " << idx_ << " row = item;\n";
    }
    coordinates("    ", "row", 0, row_rank);
    walked_ = 0;
    if (s_.cached) declare_row_cache();
    // A split row's walks: its slice of the row (the last block of the row goes on alone).
    const std::string slice_elements = std::to_string(kSplitSliceElements);
    const std::string walk_first =
        split ? "slice * " + slice_elements + " + threadIdx.x" : std::string("threadIdx.x");
    const std::string walk_end = split ? "min(static_cast<" + idx_ + ">(" + row_size +
                                             "), (slice + 1) * " + slice_elements + ")"
                                       : row_size;
    const bool phased = s_.phases > 1;
    int phase = 0;
    for (size_t id = 0; id < k_.exprs.size(); ++id) {
      const Expr& e = k_.exprs[id];
      if (e.op != Op::Reduce) continue;
      row_exprs(static_cast<int>(id));
      const std::string acc_type = accumulator_type(e.dtype);
      out_ << "    " << value_type(e.dtype) << " " << v(static_cast<int>(id)) << ";\n"
           << "    {\n"
           << "      " << acc_type << " acc = " << identity(e.reduce, acc_type) << ";\n";
      if (phased) out_ << "      if (phase == " << phase << ") {\n";
      fold_elements(static_cast<int>(id), walk_first, walk_end, "blockDim.x");
      out_ << "      acc = kiln_block_reduce(acc, " << combiner(e.reduce) << ", reinterpret_cast<"
           << acc_type << "*>(kiln_shared));\n";
      if (split) split_combine(e, acc_type);
      if (phased) phase_result(acc_type, phase++);
      out_ << "      " << v(static_cast<int>(id)) << " = " << finish_reduce(e, "acc") << ";\n"
           << "    }\n";
    }
    row_exprs(static_cast<int>(k_.exprs.size()));
    bool element_stores = false;
    for (const auto& st : k_.stores)
      element_stores = element_stores || kernel::stores_per_element(k_, st);
    // In a split row's store walk every block of the row gets here; the first stores the row's
    // values. Otherwise only the block that combined the row's last Reduce does.
    const std::string row_store_guard =
        split && element_stores ? "threadIdx.x == 0 && slice == 0" : "threadIdx.x == 0";
    for (const auto& st : k_.stores) {
      if (kernel::stores_per_element(k_, st)) continue;
      out_ << "    if (" << row_store_guard << ") " << k_.buffers[st.map.buffer].name << "["
           << offset(st.map) << "] = " << stored_value(st) << ";\n";
    }
    if (element_stores) store_elements(walk_first, walk_end, "blockDim.x");
    out_ << "  }\n";
  }

  /// Closes the walk of phase `phase`: its last block leaves the combined accumulator in the
  /// workspace and, unless the row's stores come next, ends the row's work in this launch.
  /// Later phases read it back.
  void phase_result(const std::string& acc_type, int phase) {
    const std::string at = "reinterpret_cast<" + acc_type + "*>(workspace + " +
                           std::to_string(workspace_results_offset(k_, s_)) + ")[row * " +
                           std::to_string(count_reduces(k_)) + " + " + std::to_string(phase) + "]";
    if (phase + 1 < s_.phases) {
      out_ << "      if (threadIdx.x == 0) " << at << " = acc;\n"
           << "      continue;\n";
    }
    out_ << "      } else {\n"
         << "        acc = " << at << ";\n"
         << "      }\n";
  }

  /// Split reductions: each block leaves its slice's partial in the workspace; the last block of
  /// the row (found with a counter, after a fence) combines them in slice order and goes on.
  void split_combine(const Expr& e, const std::string& acc_type) {
    const std::string slices = std::to_string(s_.slices);
    const std::string counters_at = std::to_string(workspace_counters_offset(k_, s_));
    out_ << "      " << acc_type << "* partials = reinterpret_cast<" << acc_type
         << "*>(workspace);\n"
         << "      unsigned int* counters = reinterpret_cast<unsigned int*>(workspace + "
         << counters_at << ");\n"
         << "      if (threadIdx.x == 0) {\n"
         << "        partials[row * " << slices << " + slice] = acc;\n"
         << "        __threadfence();\n"
         << "        kiln_last = atomicAdd(&counters[row], 1u) == " << slices << " - 1;\n"
         << "      }\n"
         << "      __syncthreads();\n"
         << "      if (!kiln_last) continue;\n"
         << "      __threadfence();\n"
         << "      acc = reinterpret_cast<volatile " << acc_type << "*>(partials)[row * " << slices
         << "];\n"
         << "      for (int s = 1; s < " << slices << "; ++s) acc = " << combiner(e.reduce)
         << "(acc, reinterpret_cast<volatile " << acc_type << "*>(partials)[row * " << slices
         << " + s]);\n"
         << "      if (threadIdx.x == 0) counters[row] = 0;  // ready for the next launch\n";
  }

  const Kernel& k_;
  const CudaSchedule& s_;
  std::string entry_;
  std::vector<bool> element_;
  bool generic_;  // sizes, strides and offsets with terms follow the size parameters
  std::string idx_;
  int next_row_expr_ = 0;
  int walked_ = 0;  // element-level exprs below this were computed by an earlier walk of the row
  std::ostringstream out_;
};

}  // namespace

std::string phase_entry(const std::string& entry, int phase) {
  return phase == 0 ? entry : entry + "_phase" + std::to_string(phase);
}

namespace {

std::string identifier(const std::string& name) {
  std::string id = name.empty() ? "kernel" : name;
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (std::isdigit(static_cast<unsigned char>(id[0]))) id = "k" + id;
  return id;
}

}  // namespace

std::string emit_cuda_kernel(const Kernel& kernel, const CudaSchedule& schedule,
                             const std::string& entry) {
  kernel::validate(kernel);
  return Emitter(kernel, schedule, entry).emit();
}

bool cuda_covers(kernel::Op op, kernel::DType operand) {
  return kernel::defined_on(op, operand);
}

CudaModuleSource emit_cuda_module(const std::vector<Kernel>& kernels) {
  for (const Kernel& k : kernels) {
    if (const auto op = kernel::first_uncovered_op(k, cuda_covers))
      throw Error(ErrorKind::Unsupported, "CUDA codegen has no " + *op + " (in " + k.name + ")");
    if (const std::string problem = kernel::generic_problem(k); !problem.empty())
      throw Error(ErrorKind::Unsupported,
                  "CUDA codegen: kernel " + k.name + " cannot be size-generic: " + problem);
  }
  CudaModuleSource module;
  std::string source = kCudaPrelude;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Kernel collapsed = kernel::collapse_dims(kernels[i]);
    CudaKernelSource k;
    k.entry = identifier(kernels[i].name) + "_" + std::to_string(i);
    k.schedule = choose_cuda_schedule(collapsed);
    k.num_buffers = static_cast<int>(collapsed.buffers.size());
    if (kernel::is_size_generic(collapsed)) {
      // Its workspace and the count of its phases' blocks follow the rows: none of them yet.
      if (k.schedule.slices > 1)
        throw Error(ErrorKind::Unsupported, "CUDA codegen: kernel " + kernels[i].name +
                                                " cannot be size-generic: its rows are split "
                                                "across blocks at its example binding");
      k.generic = collapsed;
    }
    source += "\n" + emit_cuda_kernel(collapsed, k.schedule, k.entry);
    module.kernels.push_back(std::move(k));
  }
  module.source = std::move(source);
  return module;
}

}  // namespace kiln::codegen::cuda
