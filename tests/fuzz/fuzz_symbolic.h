// Symbolic sizes in the differential fuzzer: a seed's symbolic case (make_symbolic_case) is
// compiled once as a shape class (backend/api/compile_class.h), from the case made at a base
// binding, at one binding per size input moved by one and at a check binding, and the class's
// plan is then run at bindings it was not compiled at (0-free, primes, both sides of vector
// widths) and compared with eager at each, within the case's error bounds there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::fuzz {

struct SymbolicResult {
  uint64_t seed = 0;
  bool passed = false;
  int size_inputs = 0;
  /// Whether a class was compiled; if not, why (`not_formed`). Not a failure: the program itself
  /// changes with its sizes (an op drawn from the data), or the pipeline decides otherwise at
  /// the moved bindings (the refusals a shape class makes; compile_class says which).
  bool formed = false;
  std::string not_formed;
  int generic_kernels = 0;
  int bindings_run = 0;      // bindings the class's plan ran at, compared with eager there
  int bindings_skipped = 0;  // bindings whose program is not the class's (its data decided an op)
  int64_t checked = 0;       // output elements compared, over all bindings run
  int64_t unchecked = 0;     // float output elements whose bound is inf
  double seconds = 0;
  std::string report;  // on failure: what differs, and the reproducer
};

/// The results of many seeds, added up.
struct SymbolicTally {
  int cases = 0, with_sizes = 0, formed = 0, kernels = 0, run = 0, skipped = 0;
  int64_t checked = 0, unchecked = 0;
  std::vector<uint64_t> failed;
  std::string reports;  // of the failed seeds

  void add(const SymbolicResult& r);
  /// "N cases: ... failed; ... with size inputs, ... classes (... generic kernels); plans run at
  /// ... bindings, ... skipped; ... elements checked, ... not".
  std::string summary() const;
};

/// Compiles the seed's symbolic case as a shape class (fusion on, strict, memory planned, CPU)
/// and runs its plan at the base and check bindings and at `random_bindings` more, drawn from
/// the seed.
SymbolicResult run_symbolic_seed(uint64_t seed, int random_bindings = 6);

}  // namespace kiln::fuzz
