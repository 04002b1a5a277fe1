// `ditto export-gguf`: writes a Hugging Face model directory as a GGUF file (for llama.cpp).
#include "commands.h"
#include "core/error.h"

namespace ditto {

void add_export_gguf_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("export-gguf", "Write a model directory as GGUF (for llama.cpp)");
  cmd->callback([] { throw_error(ErrorCode::kInternal, "export-gguf: not implemented yet"); });
}

}  // namespace ditto
