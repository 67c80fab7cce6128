#include "passes/kernel/lower_group.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "kiln/error.h"
#include "passes/kernel/lower_ops.h"

namespace kiln::kernel {
namespace {

enum class Space { Element, Row };

class GroupLowering {
 public:
  GroupLowering(const ir::Graph& body, const std::string& name) : body_(body), builder_(kernel_) {
    kernel_.name = name;
    find_iteration_space();
  }

  Kernel lower() {
    for (const ir::Value* v : body_.inputs())
      add_buffer(v->type().dtype, false);
    for (const ir::Value* v : body_.outputs())
      add_buffer(v->type().dtype, true);
    for (const ir::Node* node : body_.nodes()) {
      if (is_reshaping_view(node->op())) {
        lower_view(*node);
        continue;
      }
      const Space space = space_of(*node);
      std::vector<int> args;
      for (size_t i = 0; i < node->inputs().size(); ++i)
        args.push_back(operand(node->input(i), operand_dims(*node, i, space)));
      exprs_[node->output()] = lower_node(builder_, *node, args);
      spaces_[node->output()] =
          reduced_dims(*node) && !keeps_reduced_dims(*node) ? Space::Row : space;
    }
    for (size_t i = 0; i < body_.outputs().size(); ++i) {
      const ir::Value* v = body_.outputs()[i];
      auto expr = exprs_.find(v);
      if (expr == exprs_.end()) fail("a group output is not computed by the group");
      const int buffer = static_cast<int>(body_.inputs().size() + i);
      builder_.store(buffer, strides_for(v->type(), dims_of(spaces_.at(v))), expr->second);
    }
    validate(kernel_);
    return std::move(kernel_);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorKind::Unsupported, "fusion group " + kernel_.name + ": " + why);
  }

  void find_iteration_space() {
    for (const ir::Node* node : body_.nodes()) {
      auto dims = reduced_dims(*node);
      if (!dims) continue;
      if (!reduction_) {
        reduction_ = node;
        reduced_ = *dims;
        continue;
      }
      // Siblings (fuse_reductions.h): one iteration space for all.
      if (is_contraction(*node) || is_contraction(*reduction_) || *dims != reduced_ ||
          node->input(0)->type().sizes != reduction_->input(0)->type().sizes)
        fail("reductions over different spaces");
    }
    if (reduction_ && is_contraction(*reduction_)) {
      // x[..., K] @ w[N, K]^T: the space is [..., N, K], reduced over K.
      shape_ = reduction_->input(0)->type().sizes;
      shape_.insert(shape_.end() - 1, reduction_->input(1)->type().sizes[0]);
      reduced_ = {static_cast<int>(shape_.size()) - 1};
    } else if (reduction_) {
      shape_ = reduction_->input(0)->type().sizes;
    } else {
      if (body_.outputs().empty()) fail("no outputs");
      shape_ = body_.outputs()[0]->type().sizes;
    }
    const int rank = static_cast<int>(shape_.size());
    for (int d = 0; d < rank; ++d) {
      if (!std::binary_search(reduced_.begin(), reduced_.end(), d)) order_.push_back(d);
    }
    kept_ = order_;
    order_.insert(order_.end(), reduced_.begin(), reduced_.end());
    for (int d : order_)
      kernel_.sizes.push_back(shape_[d]);
    kernel_.reduce_rank = static_cast<int>(reduced_.size());
  }

  /// A view of a reduced value inserting size-1 dims (fuse_reductions.cpp: view_role): the
  /// value itself, in element space where it lines up with the iteration space as a keepdim
  /// reduction's output would, else still in row space.
  void lower_view(const ir::Node& node) {
    auto value = exprs_.find(node.input(0));
    if (value == exprs_.end() || spaces_.at(node.input(0)) != Space::Row)
      fail("a view of something other than a reduced value");
    exprs_[node.output()] = value->second;
    const ir::TensorType& type = node.output()->type();
    const int offset = static_cast<int>(shape_.size()) - static_cast<int>(type.rank());
    bool lines_up = offset >= 0;
    for (int i = 0; lines_up && i < type.rank(); ++i) {
      const int d = offset + i;
      lines_up = type.sizes[i] == 1 || (type.sizes[i] == shape_[d] &&
                                        !std::binary_search(reduced_.begin(), reduced_.end(), d));
    }
    spaces_[node.output()] = lines_up ? Space::Element : Space::Row;
  }

  /// A node works in row space when it reads a reduction's output that dropped its dimensions.
  Space space_of(const ir::Node& node) const {
    if (reduced_dims(node)) return Space::Element;
    for (const ir::Value* v : node.inputs()) {
      auto s = spaces_.find(v);
      if (s != spaces_.end() && s->second == Space::Row) return Space::Row;
    }
    return Space::Element;
  }

  void add_buffer(DType dtype, bool output) {
    kernel_.buffers.push_back({"b" + std::to_string(kernel_.buffers.size()), dtype, output});
  }

  const std::vector<int>& dims_of(Space space) const {
    return space == Space::Row ? kept_ : all_dims();
  }

  /// The dims of the iteration space that operand `i` of `node` right-aligns to. A contraction
  /// reads x over every dim but N, its weight over (N, K) and its bias over the kept dims.
  std::vector<int> operand_dims(const ir::Node& node, size_t i, Space space) const {
    if (&node != reduction_ || !is_contraction(node)) return dims_of(space);
    const int rank = static_cast<int>(shape_.size());
    if (i == 0) {
      std::vector<int> dims = all_dims();
      dims.erase(dims.begin() + rank - 2);
      return dims;
    }
    if (i == 1) return {rank - 2, rank - 1};
    return kept_;
  }

  int operand(const ir::Value* v, const std::vector<int>& dims) {
    if (auto e = exprs_.find(v); e != exprs_.end()) return e->second;
    auto input = std::find(body_.inputs().begin(), body_.inputs().end(), v);
    if (input == body_.inputs().end()) fail("a node reads a value from outside the group");
    const int buffer = static_cast<int>(input - body_.inputs().begin());
    auto key = std::make_pair(buffer, dims);
    if (auto cached = loads_.find(key); cached != loads_.end()) return cached->second;
    return loads_[key] = builder_.load(buffer, strides_for(v->type(), dims));
  }

  /// Strides in kernel order: the value's dimensions right-aligned to `dims` (all of the
  /// iteration space, the kept dims in row space, or a contraction operand's), stride 0 where it
  /// broadcasts.
  std::vector<int64_t> strides_for(ir::TensorType type, const std::vector<int>& dims) const {
    // A view output in row space ([1, C] for a value over the kept dims [C]) drops its size-1
    // dims: they hold no elements.
    if (type.rank() > static_cast<int>(dims.size())) {
      ir::TensorType squeezed = type;
      squeezed.sizes.clear();
      squeezed.strides.clear();
      for (int i = 0; i < type.rank(); ++i)
        if (type.sizes[i] != 1) {
          squeezed.sizes.push_back(type.sizes[i]);
          squeezed.strides.push_back(type.strides[i]);
        }
      type = std::move(squeezed);
    }
    std::vector<int64_t> by_dim(shape_.size(), 0);
    const int offset = static_cast<int>(dims.size()) - static_cast<int>(type.rank());
    if (offset < 0) fail("a value of rank " + std::to_string(type.rank()) + " does not fit");
    for (int i = 0; i < type.rank(); ++i) {
      const int d = dims[offset + i];
      const int64_t size = type.sizes[i];
      if (size == shape_[d]) {
        by_dim[d] = size == 1 ? 0 : type.strides[i];
      } else if (size != 1) {
        fail("shape " + ir::type_string(type) + " does not broadcast to the iteration space");
      }
    }
    std::vector<int64_t> strides;
    for (int d : order_)
      strides.push_back(by_dim[d]);
    return strides;
  }

  const std::vector<int>& all_dims() const {
    if (all_dims_.size() != shape_.size()) {
      all_dims_.resize(shape_.size());
      std::iota(all_dims_.begin(), all_dims_.end(), 0);
    }
    return all_dims_;
  }

  const ir::Graph& body_;
  Kernel kernel_;
  KernelBuilder builder_;
  const ir::Node* reduction_ = nullptr;
  std::vector<int> reduced_;  // reduced dims of the reduction's input
  std::vector<int> kept_;     // the others
  std::vector<int> order_;    // kept, then reduced: kernel dim -> input dim
  std::vector<int64_t> shape_;
  mutable std::vector<int> all_dims_;
  std::unordered_map<const ir::Value*, int> exprs_;
  std::unordered_map<const ir::Value*, Space> spaces_;
  std::map<std::pair<int, std::vector<int>>, int> loads_;
};

}  // namespace

Kernel lower_group(const ir::Graph& body, const std::string& name) {
  return GroupLowering(body, name).lower();
}

}  // namespace kiln::kernel
