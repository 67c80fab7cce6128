// Selection, comparisons, casts and copies: the elementwise ops whose output may be bool.
#include "passes/kernel/op_lowering.h"

namespace kiln::kernel {

using namespace lowering;

namespace {

OpLowering comparison(std::string_view name, Op op) {
  return {name, [op](Lowering& l) { return l.compare(op); }, nullptr, ReducedDims::None, true};
}

OpLowering conversion(std::string_view name,
                      std::function<bool(const ir::Node&)> supports = nullptr) {
  return {name, [](Lowering& l) { return l.convert(); }, std::move(supports), ReducedDims::None,
          true};
}

// A cast on the same device and layout; a copy to pinned memory is not a kernel's to make.
bool same_device_and_layout(const ir::Node& node) {
  return is_none(node, "device") && is_none(node, "layout") && !bool_attr(node, "pin_memory");
}

}  // namespace

OpFamily selection_ops() {
  return {
      {"aten::where.self",
       [](Lowering& l) {
         const int c = l.b.cast(l.args.at(0), DType::Bool);
         return l.b.where(c, l.arg(1), l.arg(2), l.out);
       },
       nullptr, ReducedDims::None, true},
      comparison("aten::eq.Tensor", Op::Eq),
      comparison("aten::eq.Scalar", Op::Eq),
      comparison("aten::ne.Tensor", Op::Ne),
      comparison("aten::ne.Scalar", Op::Ne),
      comparison("aten::lt.Tensor", Op::Lt),
      comparison("aten::lt.Scalar", Op::Lt),
      comparison("aten::le.Tensor", Op::Le),
      comparison("aten::le.Scalar", Op::Le),
      comparison("aten::gt.Tensor", Op::Gt),
      comparison("aten::gt.Scalar", Op::Gt),
      comparison("aten::ge.Tensor", Op::Ge),
      comparison("aten::ge.Scalar", Op::Ge),
      conversion("aten::_to_copy", same_device_and_layout),
      // A copy into the layout the output's type has (canonicalize drops the ones that keep
      // their input's): written by the kernel's store, the value passes through.
      conversion("aten::clone"),
      conversion("aten::to.dtype"),
      conversion("aten::type_as"),
  };
}

}  // namespace kiln::kernel
