#include <cstdio>

#include "cli/commands.h"
#include "ditto/error.h"
#include "kernels/kernels.h"

int main(int argc, char** argv) {
  CLI::App app{"ditto: LLM inference whose logits are bitwise the same however the work is cut up"};
  app.require_subcommand(1);
  ditto::cli::register_generate(app);
  ditto::cli::register_bench(app);
  ditto::cli::register_tokenize(app);
  ditto::cli::register_verify(app);
  ditto::cli::register_inspect(app);
  ditto::cli::register_template(app);
  ditto::cli::register_chat(app);
  ditto::cli::register_serve(app);
  try {
    ditto::kernels::pin_target_from_environment();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const ditto::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    // Every failure a user can cause is a ditto::Error; anything else is a bug (the fuzz targets
    // look for them), reported rather than aborting.
    std::fprintf(stderr, "error: internal error, please report it: %s\n", e.what());
    return 1;
  }
  return 0;
}
