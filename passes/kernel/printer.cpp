#include "passes/kernel/printer.h"

#include <sstream>

#include "passes/kernel/size_terms.h"

namespace kiln::kernel {
namespace {

/// A size, stride or offset: its term where it has one (size_terms.h), else its value.
void print_value(std::ostream& os, const std::vector<std::optional<SizeTerm>>& terms, size_t i,
                 int64_t value) {
  if (i < terms.size() && terms[i]) {
    os << print_term(*terms[i]);
  } else {
    os << value;
  }
}

void print_map(std::ostream& os, const Kernel& kernel, const IndexMap& map) {
  os << kernel.buffers.at(map.buffer).name << "[";
  for (size_t d = 0; d < map.strides.size(); ++d) {
    os << (d ? ", " : "");
    print_value(os, map.stride_terms, d, map.strides[d]);
  }
  os << "]";
  if (map.offset_term) {
    os << "+" << print_term(*map.offset_term);
  } else if (map.offset != 0) {
    os << "+" << map.offset;
  }
}

}  // namespace

std::string print_kernel(const Kernel& kernel) {
  std::ostringstream os;
  os << "kernel " << kernel.name << " [";
  for (size_t d = 0; d < kernel.sizes.size(); ++d) {
    os << (d ? ", " : "");
    print_value(os, kernel.size_terms, d, kernel.sizes[d]);
  }
  os << "]";
  if (kernel.reduce_rank > 0) os << " reduce " << kernel.reduce_rank;
  if (kernel.split_pieces > 0) os << " split " << kernel.split_pieces;
  os << "\n";
  if (!kernel.size_inputs.empty()) {
    os << "  sizes";
    for (size_t i = 0; i < kernel.size_inputs.size(); ++i)
      os << (i ? ", s" : " s") << i << " = " << kernel.size_inputs[i];
    os << "\n";
  }
  for (size_t i = 0; i < kernel.buffers.size(); ++i) {
    const Buffer& b = kernel.buffers[i];
    os << "  " << (b.is_output ? "out " : "in  ") << b.name << ": " << ir::dtype_name(b.dtype);
    for (const auto& [in, out] : kernel.in_place)
      if (out == static_cast<int>(i)) os << " in place of " << kernel.buffers.at(in).name;
    os << "\n";
  }
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    const Expr& e = kernel.exprs[i];
    os << "  %" << i << " = " << op_name(e.op);
    if (e.op == Op::Reduce) os << "." << reduce_kind_name(e.reduce);
    if (e.op == Op::Load) {
      os << " ";
      print_map(os, kernel, e.map);
    } else if (e.op == Op::Constant) {
      os << " ";
      if (e.constant_term) {
        os << print_term(*e.constant_term);  // its value follows the size inputs
      } else {
        os << e.constant;
      }
    }
    for (size_t a = 0; a < e.args.size(); ++a)
      os << (a ? ", %" : " %") << e.args[a];
    os << " : " << ir::dtype_name(e.dtype) << "\n";
  }
  for (const Store& s : kernel.stores) {
    os << "  store ";
    print_map(os, kernel, s.map);
    os << " = %" << s.value << "\n";
  }
  return os.str();
}

}  // namespace kiln::kernel
