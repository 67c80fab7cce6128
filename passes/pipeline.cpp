#include "passes/pipeline.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "passes/eliminate_dead_code.h"
#include "passes/ir/printer.h"
#include "passes/ir/verifier.h"

namespace kiln {
namespace {

class PassRunner {
 public:
  PassRunner(ir::Graph& graph, const PipelineOptions& options, PipelineResult& result)
      : graph_(graph), options_(options), result_(result) {
    dump("capture");
  }

  /// Runs `pass` unless disabled, then dumps and verifies the graph.
  template <typename Pass>
  void run(const std::string& name, Pass pass) {
    if (options_.disabled.count(name)) return;
    pass();
    result_.passes_run.push_back(name);
    dump(name);
    if (options_.verify) ir::check_graph(graph_, name);
  }

 private:
  void dump(const std::string& name) {
    if (options_.dump_dir.empty()) return;
    std::filesystem::create_directories(options_.dump_dir);
    char index[8];
    std::snprintf(index, sizeof index, "%02d", step_++);
    std::ofstream(std::filesystem::path(options_.dump_dir) /
                  (options_.dump_name + "." + index + "-" + name + ".kir"))
        << ir::print_graph(graph_);
  }

  ir::Graph& graph_;
  const PipelineOptions& options_;
  PipelineResult& result_;
  int step_ = 0;
};

}  // namespace

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = {"eliminate_dead_code", "plan_memory"};
  return names;
}

PipelineResult run_pipeline(ir::Graph& graph, const PipelineOptions& options) {
  PipelineResult result;
  if (options.verify) ir::check_graph(graph, "capture");
  PassRunner passes(graph, options, result);
  passes.run("eliminate_dead_code", [&] { eliminate_dead_code(graph); });
  passes.run("plan_memory", [&] {
    auto can_write = options.can_write_into_buffer ? options.can_write_into_buffer
                                                   : [](const ir::Node&) { return false; };
    result.memory = plan_memory(graph, can_write);
  });
  return result;
}

}  // namespace kiln
