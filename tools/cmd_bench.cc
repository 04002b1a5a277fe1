// `ditto bench`: machine limits (read bandwidth, FMA peak) and model speed, as ratios.
#include "commands.h"
#include "core/error.h"

namespace ditto {

void add_bench_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "Measure the machine's limits and the model's speed");
  cmd->callback([] { throw_error(ErrorCode::kInternal, "bench: not implemented yet"); });
}

}  // namespace ditto
