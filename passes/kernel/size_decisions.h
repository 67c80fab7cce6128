// The passes' decisions that depend on sizes, as comparisons of an integer with a threshold.
//
// A pass that chooses by a size (prepack a linear of enough multiply-adds, compute a linear of a
// few rows in a kernel of its own, recompute a transcendental op over few enough extra elements,
// take Winograd's transform over enough tiles) asks `at_least` or `at_most`. Outside a recording
// that only compares. Under a RecordSizeDecisions on the same thread it also logs the comparison
// and its outcome, in the order the passes ask: a shape class runs the pipeline at several
// bindings, fits each logged value to a term of its size inputs, and keeps the decision as a
// guard that every member binding must pass before a plan is made for it
// (backend/api/compile_class.h). A member whose sizes would make a pass decide otherwise is then
// no member: it gets a class of its own, compiled with that decision.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::kernel {

struct SizeDecision {
  int64_t value = 0;
  int64_t threshold = 0;
  bool outcome = false;   // value - less >= threshold
  const char* what = "";  // what is compared, and for which decision (a literal)
  /// Subtracted from `value` before the comparison: a difference of two sizes (the elements an
  /// op is recomputed for, a map's less the gate's) is no term, but each side is one.
  int64_t less = 0;
};

/// `value >= threshold`, logged in this thread's recording if one is open.
bool at_least(int64_t value, int64_t threshold, const char* what);

/// `value <= threshold` (logged as !(value >= threshold + 1)).
inline bool at_most(int64_t value, int64_t threshold, const char* what) {
  return !at_least(value, threshold + 1, what);
}

/// `value - less <= threshold`, logged with both sides (SizeDecision::less).
bool difference_at_most(int64_t value, int64_t less, int64_t threshold, const char* what);

/// Records the decisions this thread's passes make while it lives (recordings nest: an inner
/// one takes the decisions until it ends).
class RecordSizeDecisions {
 public:
  RecordSizeDecisions();
  ~RecordSizeDecisions();
  RecordSizeDecisions(const RecordSizeDecisions&) = delete;
  RecordSizeDecisions& operator=(const RecordSizeDecisions&) = delete;

  const std::vector<SizeDecision>& decisions() const { return decisions_; }

 private:
  std::vector<SizeDecision> decisions_;
  std::vector<SizeDecision>* outer_ = nullptr;
};

}  // namespace kiln::kernel
