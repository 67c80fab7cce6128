// Shape classes of a whole TorchScript module: one specialization for every size of some dims of
// its tensor inputs. A module compiles its first signature on its own, folding every size
// (specialize_graph.h). A later signature that differs from one compiled on its own only in some
// dims (shape_class.h: form_class; the same kinds of non-tensor inputs too) compiles a
// size-generic specialization instead: those dims' size reads are not folded, size arithmetic
// joins the regions that read it (size_nodes.h), and each region forms shape classes of its own
// (shape_classes.h). Every later member of the class runs that specialization.
//
// What is not folded can leave more to the interpreter: a branch on a size (`if x.size(1) > 4`)
// stays a branch, and cuts the graph into regions around it. Where the class's graph leaves more
// nodes to the interpreter than the signature's own, the class is kept in reserve: its members
// compile on their own, as before, until kOwnCompiles signatures of it have (the one it was
// formed with included), and the later ones run the class's specialization. Compile work stays
// bounded; a few sizes called again and again get code without the interpreter.
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
  /// Signatures of a class in reserve that compile on their own.
  static constexpr int kOwnCompiles = 3;

  /// The specialization of the class these inputs are a member of, or null. A class in reserve
  /// serves once kOwnCompiles of its members compiled on their own, or always where `reserves`.
  std::shared_ptr<const Specialization> member(const std::vector<c10::IValue>& inputs,
                                               bool reserves = false) const;
  /// Whether these inputs are a member of a class in reserve that they are to compile on their
  /// own (then counted: member() serves the next ones once kOwnCompiles have).
  bool compiles_on_its_own(const std::vector<c10::IValue>& inputs);
  struct Formed {
    ShapeClass shape_class;
    int interpreter_nodes;  // those of the signature it was formed with
  };
  /// The class these inputs form with a signature compiled on its own before (the most recent
  /// first), or none (`why_not`: the reason for the most recent).
  std::optional<Formed> form(const std::vector<c10::IValue>& inputs,
                             std::string* why_not = nullptr) const;
  /// A signature compiled on its own.
  void record(const std::vector<c10::IValue>& inputs, int interpreter_nodes);
  void add(ShapeClass shape_class, const std::vector<c10::IValue>& inputs,
           std::shared_ptr<const Specialization> specialization, bool in_reserve);

 private:
  struct Signature {
    std::vector<ShapeClass::Input> tensors;  // undefined where the input is not a tensor
    std::vector<int64_t> kinds;              // kind_of each input
    int interpreter_nodes;
  };
  struct Class {
    ShapeClass shape_class;
    std::vector<int64_t> kinds;
    std::shared_ptr<const Specialization> specialization;
    bool in_reserve;
    int own_compiles;  // in reserve: its signatures compiled on their own
  };
  const Class* find(const std::vector<c10::IValue>& inputs) const;  // under mutex_
  mutable std::mutex mutex_;
  std::vector<Signature> compiled_;
  std::vector<Class> classes_;
};

/// Per input of the class, the dims whose size varies.
std::vector<std::vector<int>> varying_dims(const ShapeClass& shape_class);

}  // namespace kiln
