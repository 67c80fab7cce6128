#include "passes/kernel/printer.h"

#include <sstream>

namespace kiln::kernel {
namespace {

void print_map(std::ostream& os, const Kernel& kernel, const IndexMap& map) {
  os << kernel.buffers.at(map.buffer).name << "[";
  for (size_t d = 0; d < map.strides.size(); ++d)
    os << (d ? ", " : "") << map.strides[d];
  os << "]";
  if (map.offset != 0) os << "+" << map.offset;
}

}  // namespace

std::string print_kernel(const Kernel& kernel) {
  std::ostringstream os;
  os << "kernel " << kernel.name << " [";
  for (size_t d = 0; d < kernel.sizes.size(); ++d)
    os << (d ? ", " : "") << kernel.sizes[d];
  os << "]";
  if (kernel.reduce_rank > 0) os << " reduce " << kernel.reduce_rank;
  if (kernel.split_pieces > 0) os << " split " << kernel.split_pieces;
  os << "\n";
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
      os << " " << e.constant;
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
