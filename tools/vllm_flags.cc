#include "vllm_flags.h"

#include <cstdio>
#include <memory>
#include <sstream>

#include "core/error.h"
#include "server/http_responses.h"

namespace ditto {
namespace {

// One vLLM flag ditto has no knob for. `same_as_ditto`: the values that ask for what ditto does
// anyway, "|"-separated; "" when every value is accepted (a GPU-only knob) and "-" when none is
// (a knob ditto refuses whatever its value). `why`: the warning or the refusal's reason.
struct VllmFlag {
  const char* flag;
  bool takes_value;
  const char* same_as_ditto;
  const char* why;
};

constexpr const char* kAny = "";
constexpr const char* kNone = "-";

const std::vector<VllmFlag>& vllm_flags() {
  static const std::vector<VllmFlag> flags = {
      // GPU-only or vLLM-internal knobs: accepted, nothing to do on a CPU.
      {"--gpu-memory-utilization", true, kAny, "a GPU's memory share; ditto's KV cache is --kv-cache-memory"},
      {"--swap-space", true, kAny, "GPU-to-CPU swap space; ditto's KV cache is in CPU memory already"},
      {"--cpu-offload-gb", true, kAny, "GPU weight offloading; ditto's weights are in CPU memory already"},
      {"--enforce-eager", false, kAny, "CUDA graphs; ditto has none"},
      {"--max-seq-len-to-capture", true, kAny, "CUDA graphs; ditto has none"},
      {"--cuda-graph-sizes", true, kAny, "CUDA graphs; ditto has none"},
      {"--compilation-config", true, kAny, "torch.compile settings; ditto is compiled C++"},
      {"--disable-custom-all-reduce", false, kAny, "NCCL all-reduce; ditto's tensor parallelism is MPI"},
      {"--distributed-executor-backend", true, kAny, "ditto's tensor parallelism runs under mpirun"},
      {"--trust-remote-code", false, kAny,
       "ditto runs no code from a checkpoint; an architecture it lacks is refused when the model loads"},
      {"--download-dir", true, kAny, "ditto never downloads; it reads the local Hugging Face cache"},
      {"--max-parallel-loading-workers", true, kAny, "ditto maps the weight files in one pass"},
      {"--disable-log-stats", false, kAny, "ditto prints no periodic stats line (see /metrics)"},
      {"--uvicorn-log-level", true, kAny, "ditto's HTTP server is not uvicorn (see --log-format)"},
      {"--disable-frontend-multiprocessing", false, kAny, "ditto's server is one process"},
      {"--disable-fastapi-docs", false, kAny, "ditto serves no API docs page"},
      {"--enable-chunked-prefill", false, kAny, "ditto always prefills in chunks, which changes no bit"},
      {"--no-enable-chunked-prefill", false, kAny, "ditto always prefills in chunks, which changes no bit"},
      {"--async-scheduling", false, kAny, "ditto's scheduling changes no bit of any output"},
      {"--enable-server-load-tracking", false, kAny, "ditto's GET /load always counts the requests in flight"},
      {"--seed", true, kAny,
       "ditto seeds each request: one without a seed gets one drawn and returned in the response's `seed`, "
       "and sending it back repeats the answer bit for bit"},
      // Knobs that would change the result: refused unless the value is what ditto does anyway.
      {"--dtype", true, "auto|bfloat16|bf16",
       "ditto keeps a checkpoint's bf16 weights and computes in its own fixed numerics (docs/NUMERICS.md)"},
      {"--kv-cache-dtype", true, "auto|bfloat16", "ditto's KV cache is bf16"},
      {"--load-format", true, "auto|safetensors|gguf", "ditto reads safetensors and GGUF files"},
      {"--tokenizer-mode", true, "auto|hf", "ditto reads the Hugging Face tokenizer.json (or a GGUF file's)"},
      {"--revision", true, "main", "ditto reads the local cache's refs/main snapshot"},
      {"--tokenizer-revision", true, "main", "ditto reads the local cache's refs/main snapshot"},
      {"--code-revision", true, "main", "ditto runs no code from a checkpoint"},
      {"--pipeline-parallel-size", true, "1", "ditto splits a model by tensor parallelism only"},
      {"--data-parallel-size", true, "1", "ditto runs one engine per server; start one server per replica"},
      {"--guided-decoding-backend", true, "auto|guidance|llguidance",
       "ditto's structured outputs use llguidance (docs/STRUCTURED_OUTPUTS.md)"},
      {"--structured-outputs-config", true,
       R"({"backend": "auto"}|{"backend":"auto"}|{"backend": "guidance"}|{"backend":"guidance"})",
       "ditto's structured outputs use llguidance, with no other option (docs/STRUCTURED_OUTPUTS.md)"},
      {"--quantization", true, kNone,
       "ditto takes the quantization from the file (a GGUF file's tensor types); quantizing on load would change "
       "the results"},
      {"--enable-lora", false, kNone, "ditto has no LoRA adapters"},
      {"--lora-modules", true, kNone, "ditto has no LoRA adapters"},
      {"--max-loras", true, kNone, "ditto has no LoRA adapters"},
      {"--max-lora-rank", true, kNone, "ditto has no LoRA adapters"},
      {"--rope-scaling", true, kNone, "ditto reads RoPE scaling from the model's config"},
      {"--rope-theta", true, kNone, "ditto reads RoPE theta from the model's config"},
      {"--override-generation-config", true, kNone, "ditto has no such knob yet (see --generation-config DIR)"},
      {"--uds", true, kNone, "ditto listens on TCP only (--host, --port); a Unix domain socket is not supported yet"},
      {"--config", true, kNone,
       "ditto reads no YAML file of flags (no YAML library in its build); give the flags on the command line"},
  };
  return flags;
}

bool is_one_of(const std::string& value, const std::string& values) {
  std::stringstream s(values);
  for (std::string v; std::getline(s, v, '|');)
    if (v == value) return true;
  return false;
}

// Files the flag's treatment for `value` ("" for a flag without one) into `report`.
void note(const VllmFlag& f, const std::string& value, VllmFlagReport& report) {
  const std::string given = std::string(f.flag) + (f.takes_value ? " " + value : "");
  const std::string accepted = f.same_as_ditto;
  if (accepted == kAny) {
    report.warnings.push_back(given + " is vLLM's and does nothing here: " + f.why);
  } else if (accepted != kNone && is_one_of(value, accepted)) {
    return;  // what ditto does anyway
  } else {
    report.refusals.push_back(given + ": " + f.why + (accepted == kNone ? "" : "; accepted: " + accepted) +
                              " — refused rather than run without it");
  }
}

}  // namespace

void add_vllm_serve_flags(CLI::App* cmd, EngineArgs& args, VllmFlagReport& report) {
  CLI::Option_group* group = cmd->add_option_group("vLLM compatibility", "vLLM flags ditto has no knob for");
  for (const VllmFlag& f : vllm_flags()) {
    const std::string help = std::string("vLLM's; ") +
                             (std::string(f.same_as_ditto) == kAny    ? "ignored here: "
                              : std::string(f.same_as_ditto) == kNone ? "refused: "
                                                                      : "only " + std::string(f.same_as_ditto) + ": ") +
                             f.why;
    if (f.takes_value) {
      group->add_option_function<std::string>(
          f.flag, [&f, &report](const std::string& value) { note(f, value, report); }, help);
    } else {
      group->add_flag_callback(
          f.flag, [&f, &report] { note(f, "", report); }, help);
    }
  }
  group->add_flag_callback(
      "--enable-prefix-caching", [&args] { args.enable_prefix_caching = true; },
      "vLLM's spelling of the default (prefix caching on; --no-enable-prefix-caching turns it off)");
}

void apply_vllm_flag_report(const VllmFlagReport& report, const std::string& log_format) {
  if (!report.refusals.empty()) {
    std::string message = "vLLM flag(s) ditto cannot honour:";
    for (const std::string& r : report.refusals) message += "\n  " + r;
    throw_invalid_argument(message);
  }
  for (const std::string& w : report.warnings) log_event(log_format, "warning", w);
}

}  // namespace ditto
