// llama_cpp_probe: the few llama.cpp numbers bench/llama_cpp.sh compares with ditto's, through
// libllama's C API. Built by that script against its llama.cpp build, never by ditto's CMake.
//
//   llama_cpp_probe tokenize MODEL.gguf < texts.jsonl    # {"text": ...} lines -> {"ids": [...]} lines
//   llama_cpp_probe score MODEL.gguf IDS ROWS.f32 [ROUTING.jsonl]
//                                                        # like `ditto score --token-ids IDS --json
//                                                        #   --logprobs-out ROWS.f32`
//   llama_cpp_probe generate MODEL.gguf N_PREDICT [THREADS] < prompts.jsonl
//                                                        # {"ids": [...], "ref": [...]} lines -> greedy
//                                                        #   continuations, one JSON line each
//   llama_cpp_probe vocab MODEL.gguf                     # add_bos, add_eos, end-of-generation ids
//
// tokenize: special tokens parsed and BOS added as the model's tokenizer.ggml.add_bos_token says
// (what Hugging Face's encode(text) does), or as a line's "add_special" says (false: what
// `ditto tokenize --no-add-special-tokens` and apply_chat_template do). score: one llama_decode of every id with logits
// for all positions (n_ctx = n_batch = n_ubatch = len(IDS), one thread, KV cache as llama.cpp's default f16); ROWS.f32
// is [len(IDS), n_vocab] little-endian float32 log-softmax (computed in double), row i the distribution after ids 0..i;
// stdout has one JSON line per position p >= 1: position, token_id, logprob, top_token_id, top_logprob. ROUTING.jsonl
// (MoE models): one line per sparse layer, {"layer", "experts": [n_tokens][n_expert_used] in llama.cpp's rank order,
// "router_logits": [n_tokens][n_expert]}, read from the graph's ffn_moe_argsort-L and
// ffn_moe_logits-L tensors through the eval callback (llama-graph.cpp build_moe_ffn).
//
// generate: for each prompt, N_PREDICT tokens by argmax of the logits (the first maximum, as
// llama.cpp's greedy sampler picks), never stopping at an end-of-generation token (ditto's
// --ignore-eos: EOS is an ordinary token); the prompt is one llama_decode, then one token a
// decode, the KV cache (f16, n_ctx 4096) cleared between prompts. Output per prompt:
// {"token_ids", "top2": per step [id1, logprob1, id2, logprob2], "ref_logprob": per step the
// logprob of ref[step] (a token the caller wants priced, e.g. ditto's choice), "eog": the first
// step whose token llama.cpp calls end-of-generation, -1 if none}; log-softmax in double.
// vocab: {"n_vocab", "add_bos", "add_eos", "eog_ids" (llama_vocab_is_eog over the vocabulary,
// which adds texts such as <|endoftext|> to the GGUF's ids), "gguf_eos_eot_eom_ids"}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "error: llama_cpp_probe: %s\n", message.c_str());
  std::exit(1);
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

llama_model* load(const char* path, bool vocab_only) {
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = vocab_only;
  llama_model* model = llama_model_load_from_file(path, mp);
  if (model == nullptr) die(std::string("cannot load ") + path);
  return model;
}

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text, bool add_special) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), add_special, /*parse_special=*/true);
  if (n < 0) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), add_special, true);
  }
  if (n < 0) die("tokenize failed");
  ids.resize(static_cast<size_t>(n));
  return ids;
}

int run_tokenize(const char* model_path) {
  llama_model* model = load(model_path, /*vocab_only=*/true);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    const bool add_special = j.value("add_special", llama_vocab_get_add_bos(vocab));
    const std::vector<llama_token> ids = tokenize(vocab, j.at("text").get<std::string>(), add_special);
    std::cout << nlohmann::json{{"ids", ids}}.dump() << '\n';
  }
  llama_model_free(model);
  return 0;
}

// The eval callback's capture of each MoE layer's router logits and expert order.
struct RoutingCapture {
  std::map<int, std::vector<float>> logits;   // layer -> [n_tokens][n_expert]
  std::map<int, std::vector<int32_t>> order;  // layer -> [n_tokens][n_expert], best first
  int64_t n_expert = 0;
};

// "ffn_moe_logits-3" -> 3 when `name` starts with `prefix` + "-"; -1 otherwise.
int layer_of(const char* name, const std::string& prefix) {
  const std::string n = name;
  if (n.size() <= prefix.size() + 1 || n.compare(0, prefix.size() + 1, prefix + "-") != 0) return -1;
  return std::atoi(n.c_str() + prefix.size() + 1);
}

bool capture_routing(ggml_tensor* t, bool ask, void* user_data) {
  const bool logits = layer_of(t->name, "ffn_moe_logits") >= 0;
  const bool order = layer_of(t->name, "ffn_moe_argsort") >= 0;
  if (ask) return logits || order;
  auto& c = *static_cast<RoutingCapture*>(user_data);
  if (!ggml_is_contiguous(t)) die(std::string(t->name) + " is not contiguous");
  c.n_expert = t->ne[0];
  if (logits && t->type == GGML_TYPE_F32) {
    std::vector<float>& v = c.logits[layer_of(t->name, "ffn_moe_logits")];
    v.resize(static_cast<size_t>(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
  } else if (order && t->type == GGML_TYPE_I32) {
    std::vector<int32_t>& v = c.order[layer_of(t->name, "ffn_moe_argsort")];
    v.resize(static_cast<size_t>(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
  }
  return true;
}

void write_routing(const RoutingCapture& c, const llama_model* model, uint32_t n, const char* path) {
  char buf[32] = "";
  if (llama_model_meta_val_str(model, "qwen3moe.expert_used_count", buf, sizeof(buf)) < 0) {
    die("routing needs a qwen3moe model (no qwen3moe.expert_used_count)");
  }
  const int64_t k = std::atoll(buf);
  std::ofstream out(path);
  for (const auto& [layer, order] : c.order) {
    nlohmann::json experts = nlohmann::json::array(), logits = nlohmann::json::array();
    for (uint32_t i = 0; i < n; ++i) {
      experts.push_back(std::vector<int32_t>(order.begin() + i * c.n_expert, order.begin() + i * c.n_expert + k));
      const auto it = c.logits.find(layer);
      if (it != c.logits.end()) {
        logits.push_back(
            std::vector<float>(it->second.begin() + i * c.n_expert, it->second.begin() + (i + 1) * c.n_expert));
      }
    }
    out << nlohmann::json{{"layer", layer}, {"experts", experts}, {"router_logits", logits}}.dump() << '\n';
  }
  if (!out) die(std::string("cannot write ") + path);
}

int run_score(const char* model_path, const std::string& ids_text, const char* rows_path, const char* routing_path) {
  std::vector<llama_token> ids;
  for (size_t start = 0; start <= ids_text.size();) {
    const size_t comma = ids_text.find(',', start);
    ids.push_back(std::stoi(ids_text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const uint32_t n = static_cast<uint32_t>(ids.size());
  llama_model* model = load(model_path, false);
  const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = n;
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = 1;
  RoutingCapture routing;
  if (routing_path != nullptr) {
    cp.cb_eval = capture_routing;
    cp.cb_eval_user_data = &routing;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) die("cannot create a context");
  llama_batch batch = llama_batch_init(static_cast<int32_t>(n), 0, 1);
  for (uint32_t i = 0; i < n; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(n);
  if (llama_decode(ctx, batch) != 0) die("llama_decode failed");
  std::ofstream rows(rows_path, std::ios::binary);
  std::vector<float> row(static_cast<size_t>(n_vocab));
  for (uint32_t i = 0; i < n; ++i) {
    const float* logits = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
    double max = logits[0];
    for (int32_t v = 1; v < n_vocab; ++v) max = std::max(max, static_cast<double>(logits[v]));
    double sum = 0;
    for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(logits[v] - max);
    const double lse = max + std::log(sum);
    int32_t top = 0;
    for (int32_t v = 0; v < n_vocab; ++v) {
      row[v] = static_cast<float>(logits[v] - lse);
      if (row[v] > row[top]) top = v;
    }
    rows.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * 4));
    if (i + 1 < n) {
      std::cout << nlohmann::json{{"position", i + 1},
                                  {"token_id", ids[i + 1]},
                                  {"logprob", row[ids[i + 1]]},
                                  {"top_token_id", top},
                                  {"top_logprob", row[top]}}
                       .dump()
                << '\n';
    }
  }
  if (!rows) die(std::string("cannot write ") + rows_path);
  if (routing_path != nullptr) write_routing(routing, model, n, routing_path);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}

// log-softmax of one row of logits, in double.
std::vector<double> log_softmax(const float* logits, int32_t n_vocab) {
  double max = logits[0];
  for (int32_t v = 1; v < n_vocab; ++v) max = std::max(max, static_cast<double>(logits[v]));
  double sum = 0;
  for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(logits[v] - max);
  const double lse = max + std::log(sum);
  std::vector<double> row(static_cast<size_t>(n_vocab));
  for (int32_t v = 0; v < n_vocab; ++v) row[v] = logits[v] - lse;
  return row;
}

int run_generate(const char* model_path, int n_predict, int threads) {
  llama_model* model = load(model_path, false);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 4096;
  cp.n_batch = cp.n_ubatch = 4096;  // a prompt is one ubatch
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) die("cannot create a context");
  llama_batch batch = llama_batch_init(static_cast<int32_t>(cp.n_ctx), 0, 1);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    const std::vector<llama_token> prompt = j.at("ids").get<std::vector<llama_token>>();
    const std::vector<llama_token> ref = j.value("ref", std::vector<llama_token>{});
    if (prompt.empty()) die("an empty prompt (no ids)");
    if (prompt.size() + static_cast<size_t>(n_predict) > cp.n_ctx) die("prompt too long for n_ctx 4096");
    llama_memory_clear(llama_get_memory(ctx), true);
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.token[i] = prompt[i];
      batch.pos[i] = static_cast<llama_pos>(i);
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = i + 1 == prompt.size();
    }
    batch.n_tokens = static_cast<int32_t>(prompt.size());
    std::vector<llama_token> out;
    nlohmann::json top2 = nlohmann::json::array(), ref_logprob = nlohmann::json::array();
    int eog = -1;
    for (int step = 0; step < n_predict; ++step) {
      if (llama_decode(ctx, batch) != 0) die("llama_decode failed");
      const std::vector<double> row = log_softmax(llama_get_logits_ith(ctx, -1), n_vocab);
      int32_t a = 0, b = -1;  // best and second best; the first index wins a tie
      for (int32_t v = 1; v < n_vocab; ++v) {
        if (row[v] > row[a]) {
          b = a;
          a = v;
        } else if (b < 0 || row[v] > row[b]) {
          b = v;
        }
      }
      top2.push_back({a, row[a], b, row[b]});
      if (static_cast<size_t>(step) < ref.size()) ref_logprob.push_back(row[ref[step]]);
      if (eog < 0 && llama_vocab_is_eog(vocab, a)) eog = step;
      out.push_back(a);
      batch.token[0] = a;
      batch.pos[0] = static_cast<llama_pos>(prompt.size() + out.size() - 1);
      batch.n_seq_id[0] = 1;
      batch.seq_id[0][0] = 0;
      batch.logits[0] = 1;
      batch.n_tokens = 1;
    }
    std::cout << nlohmann::json{{"token_ids", out}, {"top2", top2}, {"ref_logprob", ref_logprob}, {"eog", eog}}.dump()
              << std::endl;
  }
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}

int run_vocab(const char* model_path) {
  llama_model* model = load(model_path, /*vocab_only=*/true);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<llama_token> eog;
  for (llama_token t = 0; t < n_vocab; ++t)
    if (llama_vocab_is_eog(vocab, t)) eog.push_back(t);
  std::vector<int64_t> eos;  // the ids the GGUF names
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    char buf[32] = "";
    if (llama_model_meta_val_str(model, key, buf, sizeof(buf)) >= 0) eos.push_back(std::atoll(buf));
  }
  std::cout << nlohmann::json{{"n_vocab", n_vocab},
                              {"add_bos", llama_vocab_get_add_bos(vocab)},
                              {"add_eos", llama_vocab_get_add_eos(vocab)},
                              {"eog_ids", eog},
                              {"gguf_eos_eot_eom_ids", eos}}
                   .dump()
            << '\n';
  llama_model_free(model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "tokenize" && argc == 3) return run_tokenize(argv[2]);
  if (mode == "score" && (argc == 5 || argc == 6)) {
    return run_score(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : nullptr);
  }
  if (mode == "generate" && (argc == 4 || argc == 5)) {
    return run_generate(argv[2], std::atoi(argv[3]), argc == 5 ? std::atoi(argv[4]) : 1);
  }
  if (mode == "vocab" && argc == 3) return run_vocab(argv[2]);
  std::fprintf(stderr,
               "usage: %s tokenize MODEL.gguf < texts.jsonl\n"
               "       %s score MODEL.gguf ID,ID,... ROWS.f32 [ROUTING.jsonl]\n"
               "       %s generate MODEL.gguf N_PREDICT [THREADS] < prompts.jsonl\n"
               "       %s vocab MODEL.gguf\n",
               argv[0], argv[0], argv[0], argv[0]);
  return 2;
}
