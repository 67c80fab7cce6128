#include "passes/kernel/split_reduction.h"

#include <algorithm>
#include <stdexcept>

namespace kiln::kernel {
namespace {

bool is_half(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

/// What a reduction's partials are carried in: float32 for the 16-bit floats (rounded once, at
/// the end, as one pass over the row rounds its float32 accumulator), else its own dtype.
DType partial_dtype(const Expr& reduce) {
  return is_half(reduce.dtype) ? DType::Float32 : reduce.dtype;
}

/// Marks `roots` and everything they read (a reduction's operand too unless `stop_at_reduce`).
std::vector<bool> reachable(const Kernel& k, const std::vector<int>& roots, bool stop_at_reduce) {
  std::vector<bool> seen(k.exprs.size(), false);
  std::vector<int> stack = roots;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (seen[id]) continue;
    seen[id] = true;
    if (stop_at_reduce && k.exprs[id].op == Op::Reduce) continue;
    for (int a : k.exprs[id].args)
      stack.push_back(a);
  }
  return seen;
}

/// For each reduction that is the variance of a mean (variance_of), that mean's id; else -1.
std::vector<int> means_of_variances(const Kernel& k) {
  std::vector<int> mean_of(k.exprs.size(), -1);
  for (size_t i = 0; i < k.exprs.size(); ++i)
    if (const std::optional<int> var = variance_of(k, static_cast<int>(i))) {
      if (mean_of[*var] < 0) mean_of[*var] = static_cast<int>(i);
    }
  return mean_of;
}

/// Whether the reduction `k` can be split: its reductions read no reduction's result
/// (a variance reads its mean's, and the pieces' means and variances merge exactly), no element
/// store does, and its means are of floats (an integer mean truncates, so a mean of truncated
/// means would not be one).
bool splittable(const Kernel& k) {
  if (k.reduce_rank == 0 || !k.in_place.empty()) return false;
  const std::vector<int> mean_of = means_of_variances(k);
  std::vector<bool> after_reduce(k.exprs.size(), false);
  bool any = false;
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    const Expr& e = k.exprs[i];
    for (int a : e.args)
      after_reduce[i] = after_reduce[i] || after_reduce[a];
    if (e.op != Op::Reduce) continue;
    // A variance's operand reads its mean and what the mean reads, which reads no reduction.
    if (after_reduce[i] && mean_of[i] < 0) return false;
    if (e.reduce == ReduceKind::Mean && !ir::is_floating(e.dtype)) return false;
    after_reduce[i] = any = true;
  }
  for (const Store& s : k.stores)
    if (stores_per_element(k, s) && after_reduce[s.value]) return false;
  return any;
}

/// The largest piece count in [2, limit] that divides `dim`, or 0.
int64_t piece_count(int64_t dim, int64_t limit) {
  for (int64_t p = std::min(limit, dim); p >= 2; --p)
    if (dim % p == 0) return p;
  return 0;
}

}  // namespace

int64_t reduced_dim_pieces(const Kernel& k, int64_t min_piece_elements, int64_t max_pieces) {
  if (!splittable(k)) return 0;
  const int64_t elements = k.num_rows() * k.row_size();
  return piece_count(k.sizes[k.row_rank()],
                     std::min(max_pieces, elements / std::max<int64_t>(1, min_piece_elements)));
}

int64_t full_reduction_pieces(const Kernel& k, int64_t min_piece_elements, int64_t max_pieces) {
  if (k.row_rank() != 0) return 0;
  return reduced_dim_pieces(k, min_piece_elements, max_pieces);
}

std::optional<SplitReduction> split_full_reduction(const Kernel& k, int64_t min_piece_elements,
                                                   int64_t max_pieces) {
  const int64_t pieces = full_reduction_pieces(k, min_piece_elements, max_pieces);
  if (pieces == 0) return std::nullopt;
  return split_into_pieces(k, pieces);
}

std::optional<SplitReduction> split_into_pieces(const Kernel& k, int64_t pieces) {
  const int split_dim = k.row_rank();  // the outermost reduced dim
  if (pieces < 2 || k.reduce_rank == 0 || k.sizes[split_dim] % pieces != 0 || !splittable(k))
    return std::nullopt;
  const int64_t piece_length = k.sizes[split_dim] / pieces;
  // The partials of piece p lie at p * rows + the row's index (row-major over the row dims).
  const int64_t rows = k.num_rows();
  std::vector<int64_t> row_strides(split_dim, 1);
  for (int d = split_dim - 2; d >= 0; --d)
    row_strides[d] = row_strides[d + 1] * k.sizes[d + 1];
  const std::vector<bool> element = element_levels(k);
  const int num_buffers = static_cast<int>(k.buffers.size());
  const int num_inputs = k.num_inputs();

  // partial computes the reductions and the element stores; finish what the row stores read.
  std::vector<int> reductions, element_roots, row_roots;
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (k.exprs[i].op != Op::Reduce) continue;
    reductions.push_back(static_cast<int>(i));
    element_roots.push_back(static_cast<int>(i));
  }
  for (const Store& s : k.stores)
    (stores_per_element(k, s) ? element_roots : row_roots).push_back(s.value);

  SplitReduction split;
  split.pieces = pieces;
  split.rows = rows;

  // partial: [pieces, rows..., piece_length, the other reduced dims...]; pieces and rows are
  // its rows.
  Kernel& partial = split.partial;
  partial.name = k.name + "_partial";
  partial.sizes = k.sizes;
  partial.sizes[split_dim] = piece_length;
  partial.sizes.insert(partial.sizes.begin(), pieces);
  partial.reduce_rank = k.reduce_rank;
  partial.buffers = k.buffers;
  auto piece_map = [&](IndexMap map) {
    map.strides.insert(map.strides.begin(), map.strides[split_dim] * piece_length);
    return map;
  };
  const std::vector<bool> in_partial = reachable(k, element_roots, false);
  std::vector<int> partial_id(k.exprs.size(), -1);
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (!in_partial[i]) continue;
    Expr e = k.exprs[i];
    for (int& a : e.args)
      a = partial_id[a];
    if (e.op == Op::Load) e.map = piece_map(e.map);
    if (e.op == Op::Reduce && is_half(e.dtype)) {
      partial.exprs.push_back(Expr{Op::Cast, DType::Float32, {e.args[0]}});
      e.args[0] = static_cast<int>(partial.exprs.size()) - 1;
      e.dtype = DType::Float32;
    }
    partial.exprs.push_back(e);
    partial_id[i] = static_cast<int>(partial.exprs.size()) - 1;
  }
  for (const Store& s : k.stores)
    if (stores_per_element(k, s)) partial.stores.push_back({piece_map(s.map), partial_id[s.value]});
  for (size_t r = 0; r < reductions.size(); ++r) {
    const int buffer = num_buffers + static_cast<int>(r);
    partial.buffers.push_back(
        {"b" + std::to_string(buffer), partial_dtype(k.exprs[reductions[r]]), true});
    std::vector<int64_t> strides(partial.sizes.size(), 0);
    strides[0] = rows;
    std::copy(row_strides.begin(), row_strides.end(), strides.begin() + 1);
    partial.stores.push_back({{buffer, strides, 0}, partial_id[reductions[r]]});
  }

  // finish: [rows..., pieces], the pieces reduced; the kernel's inputs, the partials, the
  // kernel's outputs.
  Kernel& finish = split.finish;
  finish.name = k.name + "_finish";
  finish.sizes.assign(k.sizes.begin(), k.sizes.begin() + split_dim);
  finish.sizes.push_back(pieces);
  finish.reduce_rank = 1;
  const int num_partials = static_cast<int>(reductions.size());
  auto finish_buffer = [&](int b) { return b < num_inputs ? b : b + num_partials; };
  for (int b = 0; b < num_inputs; ++b) {
    finish.buffers.push_back(k.buffers[b]);
    split.finish_buffers.push_back(b);
  }
  for (int r = 0; r < num_partials; ++r) {
    Buffer partial_buffer = partial.buffers[num_buffers + r];
    partial_buffer.is_output = false;
    finish.buffers.push_back(partial_buffer);
    split.finish_buffers.push_back(num_buffers + r);
  }
  for (int b = num_inputs; b < num_buffers; ++b) {
    finish.buffers.push_back(k.buffers[b]);
    split.finish_buffers.push_back(b);
  }
  for (size_t i = 0; i < finish.buffers.size(); ++i)
    finish.buffers[i].name = "b" + std::to_string(i);
  auto row_map = [&](IndexMap map) {
    map.buffer = finish_buffer(map.buffer);
    map.strides.resize(split_dim);  // a row-level map: zero along the reduced dims
    map.strides.push_back(0);       // and along the pieces
    return map;
  };
  std::vector<bool> in_finish = reachable(k, row_roots, true);
  const std::vector<int> mean_of = means_of_variances(k);
  for (size_t i = 0; i < k.exprs.size(); ++i)
    if (in_finish[i] && mean_of[i] >= 0) in_finish[mean_of[i]] = true;  // merging needs it
  std::vector<int> finish_id(k.exprs.size(), -1);
  std::vector<int> partial_load(k.exprs.size(), -1);  // per reduction: its partials, loaded
  auto add = [&](Expr e) {
    finish.exprs.push_back(std::move(e));
    return static_cast<int>(finish.exprs.size()) - 1;
  };
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    if (!in_finish[i]) continue;
    const Expr& old = k.exprs[i];
    if (old.op == Op::Reduce) {
      const int r =
          static_cast<int>(std::find(reductions.begin(), reductions.end(), i) - reductions.begin());
      const DType carried = partial_dtype(old);
      Expr load{Op::Load, carried, {}};
      load.map = {num_inputs + r, row_strides, 0};
      load.map.strides.push_back(rows);
      partial_load[i] = add(load);
      Expr fold{Op::Reduce, carried, {partial_load[i]}};
      fold.reduce = old.reduce;
      const int folded = add(fold);
      if (const int mean = mean_of[i]; mean >= 0) {
        // Pieces of n elements each with means m_p and variances v_p: the whole's variance is
        // mean(v_p) + mean((m_p - M)^2), M the mean of the m_p (Chan et al.'s merge, exact for
        // equal counts).
        const int deviation = add(Expr{Op::Sub, carried, {partial_load[mean], finish_id[mean]}});
        Expr between{Op::Reduce, carried, {add(Expr{Op::Mul, carried, {deviation, deviation}})}};
        between.reduce = ReduceKind::Mean;
        const int spread = add(between);
        add(Expr{Op::Add, carried, {folded, spread}});
      }
      if (carried != old.dtype)
        finish.exprs.push_back(
            Expr{Op::Cast, old.dtype, {static_cast<int>(finish.exprs.size()) - 1}});
    } else {
      if (element[i]) return std::nullopt;  // splittable() rules this out
      Expr e = old;
      for (int& a : e.args)
        a = finish_id[a];
      if (e.op == Op::Load) e.map = row_map(e.map);
      finish.exprs.push_back(e);
    }
    finish_id[i] = static_cast<int>(finish.exprs.size()) - 1;
  }
  for (const Store& s : k.stores)
    if (!stores_per_element(k, s)) finish.stores.push_back({row_map(s.map), finish_id[s.value]});

  // A kernel this could not split correctly must run whole, not wrong (the tests require the
  // splits they expect, so a mistake here shows there).
  try {
    validate(split.partial);
    validate(split.finish);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  return split;
}

}  // namespace kiln::kernel
