// Subcommands of the `ditto` CLI; each file adds one to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace ditto {

void add_generate_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_embed_command(CLI::App& app);
void add_make_test_model_command(CLI::App& app);
void add_render_chat_command(CLI::App& app);
void add_tokenize_commands(CLI::App& app);  // tokenize and detokenize
void add_bench_command(CLI::App& app);
void add_export_gguf_command(CLI::App& app);
void add_export_hf_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_check_invariance_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace ditto
