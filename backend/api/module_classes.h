// Shape classes of a whole TorchScript module: one specialization for every size of some dims of
// its tensor inputs. A module compiles its first signature on its own, folding every size
// (specialize_graph.h). A later signature that differs from one compiled on its own only in some
// dims (shape_class.h: form_class; the same kinds of non-tensor inputs too) compiles a
// size-generic specialization instead: those dims' size reads are not folded, size arithmetic
// joins the regions that read it (size_nodes.h), and each region forms shape classes of its own
// (shape_classes.h). Every later member of the class runs that specialization.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/api/shape_class.h"

namespace kiln {

class Specialization;

class ModuleClasses {
 public:
  /// The specialization of the class these inputs are a member of, or null.
  std::shared_ptr<const Specialization> member(const std::vector<c10::IValue>& inputs) const;
  /// The class these inputs form with a signature compiled on its own before (the most recent
  /// first), or none (`why_not`: the reason for the most recent).
  std::optional<ShapeClass> form(const std::vector<c10::IValue>& inputs,
                                 std::string* why_not = nullptr) const;
  /// A signature compiled on its own.
  void record(const std::vector<c10::IValue>& inputs);
  void add(ShapeClass shape_class, const std::vector<c10::IValue>& inputs,
           std::shared_ptr<const Specialization> specialization);

 private:
  struct Signature {
    std::vector<ShapeClass::Input> tensors;  // undefined where the input is not a tensor
    std::vector<int64_t> kinds;              // kind_of each input
  };
  struct Class {
    ShapeClass shape_class;
    std::vector<int64_t> kinds;
    std::shared_ptr<const Specialization> specialization;
  };
  mutable std::mutex mutex_;
  std::vector<Signature> compiled_;
  std::vector<Class> classes_;
};

/// Per input of the class, the dims whose size varies.
std::vector<std::vector<int>> varying_dims(const ShapeClass& shape_class);

}  // namespace kiln
