#pragma once
// --stages, --split and --stage-timeout: the pipeline across processes (runtime/pipeline.h), for
// generate, bench and serve under `mpirun -np K`.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ditto/load.h"
#include "runtime/pipeline.h"

namespace ditto::cli {

struct StageOptions {
  size_t stages = 1;
  std::vector<size_t> split;  // layers per stage; empty: balanced by weight bytes
  double timeout = 300;       // seconds a stage waits for another during a pass
};
void add_stage_options(CLI::App* command, StageOptions& stages);

// With --stages K > 1: starts MPI (the process is one of mpirun's K), points `load` at this
// process's stage and, unless `own_signals` (a server handles its own), makes SIGTERM, which
// mpirun sends every stage when one fails, end the process with a message. Null for one stage.
std::unique_ptr<Pipeline> start_stages(const StageOptions& options, LoadOptions& load, bool own_signals = false);

// A stage after the head: loads its layers of the model at `path` and computes the head's
// passes until the head finishes.
void run_stage(Pipeline& pipeline, const std::string& path, LoadOptions load);

}  // namespace ditto::cli
