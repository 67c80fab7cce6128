#include "passes/kernel/size_decisions.h"

namespace kiln::kernel {
namespace {

thread_local std::vector<SizeDecision>* recording = nullptr;

}  // namespace

bool at_least(int64_t value, int64_t threshold, const char* what) {
  const bool outcome = value >= threshold;
  if (recording) recording->push_back({value, threshold, outcome, what});
  return outcome;
}

bool difference_at_most(int64_t value, int64_t less, int64_t threshold, const char* what) {
  const bool outcome = value - less >= threshold + 1;
  if (recording) recording->push_back({value, threshold + 1, outcome, what, less});
  return !outcome;
}

RecordSizeDecisions::RecordSizeDecisions() : outer_(recording) {
  recording = &decisions_;
}

RecordSizeDecisions::~RecordSizeDecisions() {
  recording = outer_;
}

}  // namespace kiln::kernel
