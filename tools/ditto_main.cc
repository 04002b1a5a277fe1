// The `ditto` command line: one binary, one subcommand per job.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/progress.h"
#include "parallel/tensor_parallel.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"ditto: batch-invariant LLM inference. The same request gives the same bits, always."};
  app.require_subcommand(1);
  // --version names the kernel path this process would run ($DITTO_ISA or CPUID).
  app.add_flag_callback(
      "--version",
      [] {
        std::printf("ditto %s\n%s\n", DITTO_VERSION, ditto::isa_description().c_str());
        throw CLI::Success();
      },
      "Print the version and the kernel instruction-set path, then exit");
  ditto::add_generate_command(app);
  ditto::add_score_command(app);
  ditto::add_embed_command(app);
  ditto::add_make_test_model_command(app);
  ditto::add_render_chat_command(app);
  ditto::add_tokenize_commands(app);
  ditto::add_bench_command(app);
  ditto::add_export_gguf_command(app);
  ditto::add_export_hf_command(app);
  ditto::add_demo_command(app);
  ditto::add_check_invariance_command(app);
  ditto::add_serve_command(app);
  try {
    ditto::active_isa();  // a bad $DITTO_ISA fails here, before any kernel runs
    // Model loading and other long work draw a bar on a terminal (core/progress.h); a command's
    // --quiet turns them off.
    ditto::enable_progress_bars(true);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors: one line, like every other error, with status 2 (the shell convention).
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return 2;
  } catch (const ditto::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return 3;
  }
  // Output that could not be written (disk full, closed pipe) must not look like success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: writing standard output: %s\n", std::strerror(errno));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int status = run(argc, argv);
  // Rank 0 of a tensor-parallel run (--tensor-parallel-size) releases the other ranks; they have
  // returned from their command when rank 0 does. A no-op otherwise.
  try {
    ditto::TensorParallelGroup::shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: stopping the tensor-parallel ranks: %s\n", e.what());
    return status == 0 ? 1 : status;
  }
  return status;
}
