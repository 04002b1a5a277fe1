#include "engine/input_processor.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <random>
#include <utility>

#include "core/error.h"
#include "engine/chat_messages.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ditto {

struct InputProcessor::LazyGrammarVocabulary {
  std::once_flag once;
  std::shared_ptr<const GrammarVocabulary> vocab;
  std::string error;  // why it could not be built
};

InputProcessor::InputProcessor(const InputLimits& limits, const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                               GenerationDefaults defaults, PoolerConfig pooler, std::vector<int32_t> eos_token_ids)
    : limits_(limits),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      defaults_(std::move(defaults)),
      pooler_(std::move(pooler)),
      eos_token_ids_(std::move(eos_token_ids)),
      grammar_vocab_(std::make_shared<LazyGrammarVocabulary>()) {
  DITTO_CHECK(limits.vocab_size > 0 && limits.max_model_len > 0 && limits.block_size > 0) << "bad input limits";
}

std::shared_ptr<const GrammarVocabulary> InputProcessor::grammar_vocabulary() const {
  LazyGrammarVocabulary& lazy = *grammar_vocab_;
  std::call_once(lazy.once, [&] {
    if (tokenizer_ == nullptr) {
      lazy.error = "structured outputs need the model's tokenizer (tokenizer.json or a GGUF vocabulary)";
      return;
    }
    try {
      lazy.vocab = std::make_shared<const GrammarVocabulary>(*tokenizer_, limits_.vocab_size, eos_token_ids_);
    } catch (const Error& e) {
      lazy.error = e.what();
    }
  });
  if (!lazy.vocab) throw_invalid_field("structured_outputs", lazy.error);
  return lazy.vocab;
}

namespace {

// A chat field's JSON text parsed; "" is `fallback`. Throws Error(kInvalidArgument) naming `field`.
nlohmann::ordered_json parse_chat_field(const std::string& text, const char* field, nlohmann::ordered_json fallback) {
  if (text.empty()) return fallback;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw_invalid_field(field, std::string(field) + " is not valid JSON");
  return j;
}

}  // namespace

// The prompt's own chat_template (vLLM's per-request field) with the model's special tokens, or
// the model's. Compiling a request's template costs about what rendering it does (microseconds
// for a typical template), so it is not cached.
std::string InputProcessor::render_chat(const PromptInput& p) const {
  std::optional<ChatTemplate> own;
  if (!p.chat_template.empty()) {
    const std::string source = "chat_template (the request's)";
    try {
      if (chat_template_ != nullptr) {
        own = chat_template_->with_template(p.chat_template, source);
      } else {
        nlohmann::ordered_json config = nlohmann::ordered_json::object();
        if (tokenizer_ != nullptr) config = nlohmann::ordered_json::parse(tokenizer_config().dump());
        config["chat_template"] = p.chat_template;
        own = ChatTemplate::from_config(config, source);
      }
    } catch (const Error& e) {
      throw_invalid_field("chat_template", e.what());
    }
  } else if (chat_template_ == nullptr) {
    throw_invalid_field("messages", "messages: the model has no chat template");
  }
  const ChatTemplate& chat_template = own ? *own : *chat_template_;
  const std::string& format = p.chat_template_content_format;
  if (format != "auto" && format != "string" && format != "openai")
    throw_invalid_field("chat_template_content_format",
                        "chat_template_content_format must be auto, string or openai, got '" + format + "'");
  const bool parts = format == "openai" || (format == "auto" && chat_template.reads_content_parts());
  const nlohmann::ordered_json messages =
      normalize_chat_messages(parse_chat_field(*p.messages, "messages", nullptr),
                              parts ? ChatContentFormat::kOpenAi : ChatContentFormat::kString);
  const nlohmann::ordered_json tools = parse_chat_field(p.tools, "tools", nullptr);
  if (!tools.is_null() && !tools.is_array()) throw_invalid_field("tools", "tools must be a JSON array");
  const nlohmann::ordered_json kwargs =
      parse_chat_field(p.chat_template_kwargs, "chat_template_kwargs", nlohmann::ordered_json::object());
  if (!kwargs.is_object()) throw_invalid_field("chat_template_kwargs", "chat_template_kwargs must be a JSON object");
  std::string text;
  try {
    text = chat_template.render(messages, tools, p.add_generation_prompt && !p.continue_final_message, kwargs);
  } catch (const Error& e) {
    throw_invalid_field(own ? "chat_template" : "messages", e.what());
  }
  if (p.continue_final_message) {
    // The template closes the last (assistant) message; continue it instead (vLLM's rule: cut the
    // rendered text after the final message's content).
    const nlohmann::ordered_json& last = messages.back();
    const std::string content =
        last.contains("content") && last["content"].is_string() ? last["content"].get<std::string>() : "";
    const size_t at = content.empty() ? std::string::npos : text.rfind(content);
    if (at == std::string::npos)
      throw_invalid_field("continue_final_message", "the final message's content was not found in the rendered prompt");
    text.resize(at + content.size());
  }
  return text;
}

std::pair<std::vector<int32_t>, std::string> InputProcessor::encode(const PromptInput& p) const {
  const int kinds = p.text.has_value() + p.token_ids.has_value() + p.messages.has_value();
  if (kinds != 1) throw_invalid_field("prompt", "give exactly one of prompt (text), prompt_token_ids or messages");
  const char* field = p.messages ? "messages" : "prompt";
  if (p.token_ids) return {*p.token_ids, ""};
  if (tokenizer_ == nullptr) throw_invalid_field(field, "text prompts need the model's tokenizer (tokenizer.json)");
  try {
    if (p.text) return {tokenizer_->encode(*p.text, p.add_special_tokens), *p.text};
    std::string text = render_chat(p);
    // A rendered chat already holds its special tokens (apply_chat_template(tokenize=True)); vLLM's
    // chat add_special_tokens adds the tokenizer's on top.
    std::vector<int32_t> ids = tokenizer_->encode(text, p.chat_add_special_tokens);
    return {std::move(ids), std::move(text)};
  } catch (const Error& e) {
    if (!e.param().empty()) throw;
    throw Error(e.code(), e.what(), field);
  }
}

const Tokenizer& InputProcessor::need_tokenizer() const {
  if (tokenizer_ == nullptr) throw_not_found("the model has no tokenizer (no tokenizer.json / tokenizer.ggml.tokens)");
  return *tokenizer_;
}

std::string InputProcessor::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return need_tokenizer().decode(ids, skip_special_tokens);
}

std::optional<std::string> InputProcessor::id_to_token(int32_t id) const { return need_tokenizer().id_to_token(id); }

std::optional<int32_t> InputProcessor::token_to_id(const std::string& token) const {
  return need_tokenizer().token_to_id(token);
}

std::optional<int32_t> InputProcessor::bos_token_id() const { return need_tokenizer().bos_token_id(); }

const nlohmann::json& InputProcessor::tokenizer_config() const { return need_tokenizer().tokenizer_config(); }

std::vector<std::string> InputProcessor::token_strings(std::span<const int32_t> ids) const {
  const Tokenizer& t = need_tokenizer();
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(t.id_to_token(id).value_or(""));
  return out;
}

SamplingParams InputProcessor::default_sampling_params() const {
  SamplingParams p;
  defaults_.apply(p);
  return p;
}

std::vector<std::vector<int32_t>> InputProcessor::bad_words_token_ids(const std::vector<std::string>& words) const {
  const Tokenizer& t = need_tokenizer();
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    const size_t start = word.find_first_not_of(" \t\n\r\f\v");
    if (start == std::string::npos)
      throw_invalid_field("bad_words", "bad_words[" + std::to_string(i) + "] has no text but white space");
    const std::string bare = word.substr(start);
    // vLLM's rule (SamplingParams.update_from_tokenizer): the word as written (left-stripped), and
    // with a leading space when that tokenizes to as many tokens with another first token.
    std::vector<int32_t> plain = t.encode(bare, /*add_special_tokens=*/false);
    std::vector<int32_t> spaced = t.encode(" " + bare, /*add_special_tokens=*/false);
    if (plain.empty()) throw_invalid_field("bad_words", "bad_words[" + std::to_string(i) + "] tokenizes to nothing");
    const bool add_spaced = !spaced.empty() && spaced.size() == plain.size() && spaced[0] != plain[0];
    out.push_back(std::move(plain));
    if (add_spaced) out.push_back(std::move(spaced));
  }
  return out;
}

uint64_t draw_seed() {
  std::random_device rd;
  const uint64_t bits = (uint64_t{rd()} << 32) ^ rd();
  return bits & ((uint64_t{1} << 53) - 1);
}

// vLLM's truncate_prompt_tokens: the last (or, truncation_side "right", the first) k tokens; -1:
// the context's worth. Values below -1 and 0 are refused by the parameters' own checks.
void InputProcessor::truncate_prompt(EngineRequest& r, std::optional<int64_t> truncate_prompt_tokens,
                                     const std::string& truncation_side) const {
  if (!truncate_prompt_tokens) return;
  const int64_t ctx = limits_.max_model_len;
  const int64_t k = *truncate_prompt_tokens;
  if (k > ctx)
    throw_invalid_field("truncate_prompt_tokens", "truncate_prompt_tokens (" + std::to_string(k) +
                                                      ") must not exceed the context (" + std::to_string(ctx) +
                                                      " tokens)");
  const auto keep = static_cast<size_t>(k == -1 ? ctx : k);
  if (k < -1 || k == 0 || r.prompt_token_ids.size() <= keep) return;
  if (truncation_side == "right")  // the first k
    r.prompt_token_ids.resize(keep);
  else
    r.prompt_token_ids.erase(r.prompt_token_ids.begin(), r.prompt_token_ids.end() - static_cast<std::ptrdiff_t>(keep));
  r.prompt = tokenizer_ != nullptr ? tokenizer_->decode(r.prompt_token_ids, false) : "";
}

EngineRequest InputProcessor::process_pooling(const PromptInput& prompt, const PoolingParams& params) const {
  const PoolingSpec spec = resolve_pooling_spec(params, pooler_);
  if (params.truncate_prompt_tokens && *params.truncate_prompt_tokens < 1 && *params.truncate_prompt_tokens != -1)
    throw_invalid_field("truncate_prompt_tokens",
                        "truncate_prompt_tokens must be -1 (the context) or at least 1, got " +
                            std::to_string(*params.truncate_prompt_tokens));
  EngineRequest r;
  std::tie(r.prompt_token_ids, r.prompt) = encode(prompt);
  truncate_prompt(r, params.truncate_prompt_tokens, "left");
  const auto n = static_cast<int64_t>(r.prompt_token_ids.size());
  const int64_t ctx = limits_.max_model_len;
  if (n == 0) throw_invalid_field("input", "the input is empty");
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = r.prompt_token_ids[static_cast<size_t>(t)];
    if (id < 0 || id >= limits_.vocab_size)
      throw_invalid_field("input", "input token " + std::to_string(t) + " = " + std::to_string(id) +
                                       " is out of vocabulary (the vocabulary is [0, " +
                                       std::to_string(limits_.vocab_size) + "))");
  }
  if (n > ctx)
    throw_invalid_field("input", "This model's maximum context length is " + std::to_string(ctx) +
                                     " tokens; the input has " + std::to_string(n) +
                                     " tokens (set truncate_prompt_tokens to keep only the last ones)");
  const int64_t blocks = (n + limits_.block_size - 1) / limits_.block_size;
  if (blocks > limits_.num_kv_blocks)
    throw_invalid_field("input", "the input needs " + std::to_string(blocks) + " KV cache blocks (" +
                                     std::to_string(n) + " tokens) but the cache has " +
                                     std::to_string(limits_.num_kv_blocks) + " (raise --kv-cache-memory)");
  r.params.max_tokens = 0;
  r.params.min_tokens = 0;
  r.params.seed = 0;  // nothing is sampled
  r.params.temperature = 0.0f;
  r.pooling = spec;
  return r;
}

EngineRequest InputProcessor::process(const PromptInput& prompt, SamplingParams params, MaxTokensRule rule,
                                      const std::string& max_tokens_field) const {
  const char* field = prompt.messages ? "messages" : "prompt";
  EngineRequest r;
  std::tie(r.prompt_token_ids, r.prompt) = encode(prompt);
  const int64_t ctx = limits_.max_model_len;
  truncate_prompt(r, params.truncate_prompt_tokens, params.truncation_side);
  const auto n = static_cast<int64_t>(r.prompt_token_ids.size());
  const std::string context = "This model's maximum context length is " + std::to_string(ctx) + " tokens (" +
                              (limits_.max_model_len_is_model_limit ? "max_position_embeddings" : "max_model_len") +
                              " = " + std::to_string(ctx) + ")";
  if (n == 0) throw_invalid_field(field, "the prompt is empty");
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = r.prompt_token_ids[static_cast<size_t>(t)];
    if (id < 0 || id >= limits_.vocab_size)
      throw_invalid_field(field, "prompt token " + std::to_string(t) + " = " + std::to_string(id) +
                                     " is out of vocabulary (the vocabulary is [0, " +
                                     std::to_string(limits_.vocab_size) + "))");
  }
  if (n >= ctx)
    throw_invalid_field(field,
                        context + "; the prompt has " + std::to_string(n) + " tokens, which leaves no room for output");
  const int64_t kv_tokens = limits_.num_kv_blocks * limits_.block_size;
  switch (rule) {
    case MaxTokensRule::kAsGiven:
      if (params.max_tokens >= 1 && n + params.max_tokens > ctx)
        throw_invalid_field(max_tokens_field,
                            context + ". However, you requested " + std::to_string(n + params.max_tokens) +
                                " tokens (" + std::to_string(n) + " in the " +
                                (prompt.messages ? "messages" : "prompt") + ", " + std::to_string(params.max_tokens) +
                                " in the completion). Please reduce the " + "length of the " +
                                (prompt.messages ? "messages" : "prompt") + " or completion.");
      break;
    case MaxTokensRule::kClipToContext:
      if (params.max_tokens > ctx - n) {
        params.max_tokens = ctx - n;
        params.min_tokens = std::min(params.min_tokens, params.max_tokens);
      }
      break;
    case MaxTokensRule::kRestOfContext:
      params.max_tokens = std::max<int64_t>(1, std::min(ctx, kv_tokens) - n);
      if (defaults_.max_new_tokens) params.max_tokens = std::min(params.max_tokens, *defaults_.max_new_tokens);
      params.min_tokens = std::min(params.min_tokens, params.max_tokens);
      break;
  }
  if (!params.bad_words.empty()) {
    if (tokenizer_ == nullptr)
      throw_invalid_field("bad_words", "bad_words need the model's tokenizer (tokenizer.json)");
    for (const std::vector<int32_t>& ids : bad_words_token_ids(params.bad_words))
      params.bad_words_token_ids.push_back(ids);
  }
  if (params.logprob_token_ids && !params.logprobs) params.logprobs = 0;  // the entries come with logprobs
  params.validate(limits_.vocab_size, limits_.max_logprobs);
  if (!params.stop.empty() && tokenizer_ == nullptr)
    throw_invalid_field("stop", "stop strings need the model's tokenizer (tokenizer.json)");
  const int64_t blocks = (n + params.max_tokens + limits_.block_size - 1) / limits_.block_size;
  if (blocks > limits_.num_kv_blocks)
    throw_invalid_field(max_tokens_field, "the request needs " + std::to_string(blocks) + " KV cache blocks (" +
                                              std::to_string(n) + " prompt tokens + max_tokens " +
                                              std::to_string(params.max_tokens) + ") but the cache has " +
                                              std::to_string(limits_.num_kv_blocks) +
                                              "; raise --kv-cache-memory or lower max_tokens");
  if (params.structured_outputs)
    r.grammar = StructuredOutputGrammar::compile(*params.structured_outputs, grammar_vocabulary());
  if (!params.seed) params.seed = draw_seed();
  r.params = std::move(params);
  return r;
}

}  // namespace ditto
