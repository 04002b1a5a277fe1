#include "ditto/llm.h"

#include "core/error.h"
#include "engine/llm_engine.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

LLM::LLM(const EngineArgs& args) : engine_(std::make_unique<LLMEngine>(args)) {}

LLM::~LLM() = default;

std::vector<GenerateResult> LLM::generate(const std::vector<PromptInput>& prompts,
                                          const std::vector<SamplingParams>& params, bool progress,
                                          const ResultFn& on_result) {
  return engine_->generate(prompts, params, progress, on_result);
}

std::vector<RequestOutput> LLM::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  std::vector<PromptInput> inputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) inputs[i].text = prompts[i];
  std::vector<RequestOutput> out;
  for (GenerateResult& r : engine_->generate(inputs, {params})) {
    if (r.error) throw Error(ErrorCode::kInvalidArgument, *r.error);
    out.push_back(std::move(r.output));
  }
  return out;
}

std::vector<GenerateResult> LLM::generate_stream(const std::vector<PromptInput>& prompts,
                                                 const std::vector<SamplingParams>& params, const DeltaFn& on_delta) {
  return engine_->generate(prompts, params, /*progress=*/false, nullptr, nullptr, {}, nullptr, {}, on_delta);
}

std::vector<int32_t> LLM::tokenize(const PromptInput& prompt) const {
  return engine_->input_processor().encode(prompt).first;
}

std::string LLM::render_chat(const PromptInput& chat) const {
  if (!chat.messages) throw_invalid_field("messages", "render_chat: the prompt has no messages");
  return engine_->input_processor().encode(chat).second;
}

std::string LLM::detokenize(const std::vector<int32_t>& token_ids, bool skip_special_tokens) const {
  return engine_->input_processor().decode(token_ids, skip_special_tokens);
}

const LLM::Stats& LLM::last_stats() const { return engine_->last_stats(); }

const EngineArgs& LLM::args() const { return engine_->args(); }

void shutdown_tensor_parallel() { TensorParallelGroup::shutdown(); }

}  // namespace ditto
