#include "cli/stages.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>

#include "ditto/error.h"
#include "model/stages.h"
#include "model/weights.h"

namespace ditto::cli {

namespace {

char stop_message[160];

extern "C" void stop_on_signal(int) {
  // Only async-signal-safe calls here.
  if (write(STDERR_FILENO, stop_message, std::strlen(stop_message)) < 0) _exit(1);
  _exit(1);
}

}  // namespace

void add_stage_options(CLI::App* command, StageOptions& o) {
  command->add_option("--stages", o.stages,
                      "Pipeline stages, one process each, under `mpirun -np N`: each loads only its layers "
                      "(the logits are the same bits as one process)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  command->add_option("--split", o.split,
                      "With --stages: the layers of each stage, comma-separated (default: balanced by the "
                      "weight bytes a row multiplies with on each, of a mixture the experts it is routed to)")
      ->delimiter(',')->check(CLI::Range(1, 1 << 20));
  command->add_option("--stage-timeout", o.timeout,
                      "With --stages: seconds a stage waits for another during a pass before it ends the run")
      ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
}

std::unique_ptr<Pipeline> start_stages(const StageOptions& o, LoadOptions& load, bool own_signals) {
  if (o.stages == 1) {
    if (!o.split.empty()) throw Error("--split cuts the model into --stages: give --stages too");
    // Without --stages, each of mpirun's processes would run the whole command by itself.
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (size && std::string(size) != "1")
      throw Error(std::string("this is one of ") + size + " processes that mpirun started: give --stages " + size +
                  " to cut the model into that many stages");
    return nullptr;
  }
  std::unique_ptr<Pipeline> pipeline = Pipeline::start(o.stages, o.timeout);
  load.stages = o.stages;
  load.stage = pipeline->stage();
  load.split = o.split;
  if (!own_signals || !pipeline->head()) {
    std::snprintf(stop_message, sizeof stop_message,
                  "ditto: stage %zu of %zu: stopped by SIGTERM (mpirun stops every stage when one of them fails or "
                  "is stopped)\n",
                  pipeline->stage(), pipeline->stages());
    std::signal(SIGTERM, stop_on_signal);
  }
  return pipeline;
}

void run_stage(Pipeline& pipeline, const std::string& path, LoadOptions load) {
  load.tokenizer = false;
  const LoadedModel loaded = load_model(path, load);
  std::fprintf(stderr, "ditto: stage %zu of %zu: %s\n", pipeline.stage(), pipeline.stages(),
               part_text(loaded.model->weights().part).c_str());
  pipeline.run_stage(*loaded.model);
  pipeline.finish();
}

}  // namespace ditto::cli
