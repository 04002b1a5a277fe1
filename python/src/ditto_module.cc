// ditto._ditto: the Python package's view of the C++ engine (pybind11). The vLLM-shaped classes
// (LLM, SamplingParams, RequestOutput, ...) are written in Python over this module
// (python/ditto/); this file only moves values across, releases the GIL while the engine works
// and turns ditto::Error into the Python exception a vLLM user expects:
//   kInvalidArgument → ValueError, kNotFound → FileNotFoundError, kResourceExhausted → MemoryError,
//   anything else → RuntimeError.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <Python.h>

#include <bit>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ditto/async_llm.h"
#include "ditto/engine_args.h"
#include "ditto/error.h"
#include "ditto/llm.h"
#include "ditto/pooling.h"
#include "ditto/prompt_input.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"

namespace py = pybind11;

namespace ditto {
namespace {

// What one Python LLM holds: the public ditto::LLM (include/ditto/llm.h), entered with the GIL
// released.
class PyLLM {
 public:
  explicit PyLLM(const EngineArgs& args) : llm_(args) {}

  // The weight-transfer calls (include/ditto/llm.h), the GIL released while packing.
  void init_weight_transfer_engine(const std::string& init_info_json) {
    llm_.init_weight_transfer_engine(init_info_json);
  }
  void start_weight_update() {
    buffers_.clear();
    llm_.start_weight_update();
  }
  void update_weights_shm(const std::string& update_info_json) {
    py::gil_scoped_release release;
    llm_.update_weights(update_info_json);
  }
  // Tensors from Python buffers (numpy arrays, bytes, memoryviews), C-contiguous, little-endian;
  // each buffer is kept alive until the update finishes (the engine borrows its bytes).
  void update_weights_buffers(const std::vector<std::string>& names, const std::vector<std::string>& dtype_names,
                              const std::vector<std::vector<int64_t>>& shapes, const std::vector<py::buffer>& buffers) {
    if (dtype_names.size() != names.size() || shapes.size() != names.size() || buffers.size() != names.size())
      throw Error(ErrorCode::kInvalidArgument,
                  "update_weights: names, dtype_names, shapes and tensors differ in length");
    std::vector<WeightTensor> tensors;
    for (size_t i = 0; i < names.size(); ++i) {
      const py::buffer_info info = buffers[i].request();
      const bool contiguous = [&] {
        py::ssize_t stride = info.itemsize;
        for (size_t d = info.ndim; d-- > 0;) {
          if (info.shape[d] > 1 && info.strides[d] != stride) return false;
          stride *= info.shape[d];
        }
        return true;
      }();
      if (!contiguous)
        throw Error(ErrorCode::kInvalidArgument, "update_weights: tensor '" + names[i] + "' is not C-contiguous");
      tensors.push_back(
          {names[i], dtype_names[i], shapes[i], info.ptr, static_cast<size_t>(info.size * info.itemsize)});
      buffers_.push_back(buffers[i]);
    }
    py::gil_scoped_release release;
    llm_.update_weights(tensors);
  }
  void finish_weight_update(const std::string& weight_version) {
    {
      py::gil_scoped_release release;
      llm_.finish_weight_update(weight_version);
    }
    buffers_.clear();
  }
  std::string weight_version() const { return llm_.weight_version(); }

  // Runs the batch with the GIL released. Before each engine step: Ctrl-C (a pending signal) or
  // an exception from `on_step` aborts the batch and is raised here; `on_step(done, total,
  // prompt_tokens, output_tokens)` reports progress. A refused prompt stops the batch before any
  // step and raises its error (ValueError: "prompt I: why").
  // rest_of_context[i]: prompt i's max_tokens is what the context and the KV cache leave
  // (max_tokens=None), else it is cut to the context (vLLM's offline rule).
  // pooling not empty (one shared, or one per prompt): every prompt is a pooling request
  // (GenerateOptions::pooling; `params` then ignored) and its result is RequestOutput::pooled.
  std::vector<RequestOutput> generate(const std::vector<PromptInput>& prompts,
                                      const std::vector<SamplingParams>& params,
                                      const std::vector<std::string>& request_ids,
                                      const std::vector<bool>& rest_of_context, const py::object& on_step,
                                      const std::vector<PoolingParams>& pooling) {
    GenerateOptions options;
    options.request_ids = request_ids;
    options.pooling = pooling;
    for (bool rest : rest_of_context)
      options.max_tokens_rules.push_back(rest ? MaxTokensRule::kRestOfContext : MaxTokensRule::kClipToContext);
    std::optional<std::string> refused;
    std::optional<py::error_already_set> raised;
    options.on_result = [&](size_t, const GenerateResult& r) {
      if (r.error && !refused) refused = *r.error;
    };
    options.on_step = [&](const GenerateProgress& at) {
      if (refused || raised) return false;
      py::gil_scoped_acquire gil;
      try {
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!on_step.is_none()) on_step(at.done, at.total, at.prompt_tokens, at.output_tokens);
      } catch (py::error_already_set& e) {
        raised.emplace(std::move(e));
        return false;
      }
      return true;
    };
    std::vector<GenerateResult> results;
    {
      py::gil_scoped_release release;
      results = llm_.generate(prompts, params, options);
    }
    if (raised) throw std::move(*raised);
    if (refused) throw Error(ErrorCode::kInvalidArgument, *refused);
    std::vector<RequestOutput> out;
    out.reserve(results.size());
    for (GenerateResult& r : results) out.push_back(std::move(r.output));
    return out;
  }

  // LLM::score's pooling form with the GIL released: each (text_1, text_2) pair's relevance (a
  // reranker's yes/no score, or the cosine of an embedding model's two embeddings), in order. A
  // refused pair raises its error (ValueError: "prompt I: why" or "pair I: ...").
  std::vector<PoolingRequestOutput> score(const std::vector<std::string>& text_1,
                                          const std::vector<std::string>& text_2, const PoolingParams& params,
                                          const std::string& chat_template_kwargs) {
    std::vector<PoolingResult> results;
    {
      py::gil_scoped_release release;
      results = llm_.score(text_1, text_2, params, chat_template_kwargs);
    }
    std::vector<PoolingRequestOutput> out;
    out.reserve(results.size());
    for (PoolingResult& r : results) {
      if (r.error) throw Error(ErrorCode::kInvalidArgument, *r.error);
      out.push_back(std::move(r.output));
    }
    return out;
  }

  // LLM::beam_search with the GIL released.
  std::vector<BeamSearchOutput> beam_search(const std::vector<PromptInput>& prompts, const BeamSearchParams& params,
                                            uint64_t seed) {
    py::gil_scoped_release release;
    return llm_.beam_search(prompts, params, seed);
  }
  // Drops the prefix cache generate() keeps between calls (LLM::reset_prefix_cache): false while
  // a generate() runs.
  bool reset_prefix_cache() { return llm_.reset_prefix_cache(); }
  LLM& llm() { return llm_; }

  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const {
    return llm_.tokenize(PromptInput{.text = text, .add_special_tokens = add_special_tokens});
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
    return llm_.detokenize(ids, skip_special_tokens);
  }
  // The rendered chat and its token ids (apply_chat_template), through the front door.
  std::pair<std::vector<int32_t>, std::string> render_chat(const PromptInput& p) const {
    return {llm_.tokenize(p), llm_.render_chat(p)};
  }
  std::optional<std::string> id_to_token(int32_t id) const { return llm_.id_to_token(id); }
  std::optional<int32_t> token_to_id(const std::string& token) const { return llm_.token_to_id(token); }
  std::optional<int32_t> bos_token_id() const { return llm_.model_info().bos_token_id; }
  std::string tokenizer_config_json() const { return llm_.tokenizer_config_json(); }

  bool has_tokenizer() const { return llm_.model_info().has_tokenizer; }
  int64_t vocab_size() const { return llm_.model_info().vocab_size; }
  int64_t max_model_len() const { return llm_.model_info().max_model_len; }
  const std::vector<int32_t>& eos_token_ids() const { return llm_.model_info().eos_token_ids; }
  const std::string& model_dir() const { return llm_.model_info().model_dir; }
  const std::string& system_fingerprint() const { return llm_.model_info().system_fingerprint; }
  const ModelInfo& model_info() const { return llm_.model_info(); }
  const EngineArgs& args() const { return llm_.args(); }
  // The model's default sampling parameters (the front door's, from generation_config), by
  // SamplingParams' names: only the keys the configuration sets.
  py::dict generation_defaults() const {
    const GenerationDefaults& g = llm_.generation_defaults();
    // A float32 as the shortest decimal that reads back as it (0.6, not 0.6000000238418579): the
    // value the file gave, and the same float32 when the engine reads it again.
    auto shortest = [](float v) {
      char buf[32];
      const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
      return std::stod(std::string(buf, end));
    };
    py::dict d;
    if (g.temperature) d["temperature"] = shortest(*g.temperature);
    if (g.top_p) d["top_p"] = shortest(*g.top_p);
    if (g.top_k) d["top_k"] = *g.top_k;
    if (g.min_p) d["min_p"] = shortest(*g.min_p);
    if (g.repetition_penalty) d["repetition_penalty"] = shortest(*g.repetition_penalty);
    if (g.max_new_tokens) d["max_tokens"] = *g.max_new_tokens;
    return d;
  }

 private:
  LLM llm_;
  std::vector<py::buffer> buffers_;  // the tensors of the weight update in progress (borrowed by the engine)
};

// What one Python AsyncLLM holds: the public ditto::AsyncLLM (include/ditto/async_llm.h) over a
// PyLLM's model, which the binding keeps alive as long as this.
class PyAsyncLLM {
 public:
  explicit PyAsyncLLM(PyLLM& llm) : engine_(llm.llm()) {}

  // kind: "cumulative", "delta" or "final_only" (vLLM's RequestOutputKind); rest_of_context: the
  // max_tokens rule of PyLLM::generate. Raises ValueError naming the field for a bad request.
  std::shared_ptr<RequestStream> add_request(const std::string& request_id, const PromptInput& prompt,
                                             SamplingParams params, const std::string& kind, bool rest_of_context) {
    if (kind != "cumulative" && kind != "delta" && kind != "final_only")
      throw Error(ErrorCode::kInvalidArgument, "output_kind must be cumulative, delta or final_only, got " + kind);
    params.output_kind = kind == "final_only" ? RequestOutputKind::kFinalOnly : RequestOutputKind::kDelta;
    const MaxTokensRule rule = rest_of_context ? MaxTokensRule::kRestOfContext : MaxTokensRule::kClipToContext;
    py::gil_scoped_release release;  // the front door tokenizes
    return engine_.add_request(request_id, prompt, params, kind == "cumulative", rule);
  }
  void abort(const std::string& request_id) { engine_.abort(request_id); }
  // The GIL released: each waits for the engine thread to stop at a step boundary.
  void pause_generation(const std::string& mode) {
    py::gil_scoped_release release;
    engine_.pause_generation(mode);
  }
  void resume_generation() { engine_.resume_generation(); }
  bool is_paused() const { return engine_.is_paused(); }
  void finish_weight_update(const std::string& weight_version) {
    py::gil_scoped_release release;
    engine_.finish_weight_update(weight_version);
  }
  bool reset_prefix_cache() { return engine_.reset_prefix_cache(); }
  int64_t num_unfinished() const { return engine_.num_unfinished(); }

 private:
  AsyncLLM engine_;
};

}  // namespace
}  // namespace ditto

PYBIND11_MODULE(_ditto, m) {
  using namespace ditto;
  m.doc() = "ditto's C++ engine (use the `ditto` package's LLM and SamplingParams)";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      switch (e.code()) {
        case ErrorCode::kInvalidArgument: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case ErrorCode::kNotFound: PyErr_SetString(PyExc_FileNotFoundError, e.what()); return;
        case ErrorCode::kResourceExhausted: PyErr_SetString(PyExc_MemoryError, e.what()); return;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
      }
    }
  });

  py::class_<EngineArgs>(m, "EngineArgs")
      .def(py::init<>())
      .def_readwrite("model", &EngineArgs::model)
      .def_readwrite("threads", &EngineArgs::threads)
      .def_readwrite("block_size", &EngineArgs::block_size)
      .def_readwrite("kv_cache_memory", &EngineArgs::kv_cache_memory)
      .def_readwrite("max_num_batched_tokens", &EngineArgs::max_num_batched_tokens)
      .def_readwrite("max_num_seqs", &EngineArgs::max_num_seqs)
      .def_readwrite("long_prefill_token_threshold", &EngineArgs::long_prefill_token_threshold)
      .def_readwrite("enable_prefix_caching", &EngineArgs::enable_prefix_caching)
      .def_readwrite("max_model_len", &EngineArgs::max_model_len)
      .def_readwrite("max_logprobs", &EngineArgs::max_logprobs)
      .def_readwrite("tensor_parallel_size", &EngineArgs::tensor_parallel_size)
      .def_readwrite("generation_config", &EngineArgs::generation_config)
      // Any knob by its name, the value as JSON text (null: the default); ValueError naming the
      // keyword for a bad value, KeyError for no such knob.
      .def("set", [](EngineArgs& a, const std::string& name, const std::string& value) {
        if (!is_engine_arg(name)) throw py::key_error(name);
        set_engine_arg(a, name, value);
      });
  // The knobs, in --help order: the keyword arguments LLM(...) passes to EngineArgs.set.
  m.def("engine_arg_names", &engine_arg_names);

  // Tensor parallelism under mpirun (model/tensor_parallel_worker.h): True on ranks other than 0,
  // after serving rank 0 until it shut the group down (the GIL released meanwhile).
  m.def(
      "serve_as_tensor_parallel_rank",
      [](int size) {
        py::gil_scoped_release release;
        return serve_as_tensor_parallel_rank(size);
      },
      py::arg("tensor_parallel_size"));
  m.def("shutdown_tensor_parallel", [] { shutdown_tensor_parallel(); });

  // The engine's StructuredOutputsParams; json and structural_tag are JSON text (the Python
  // layer's json.dumps). Compiled by the engine's front door, not here.
  py::class_<StructuredOutputsParams>(m, "StructuredOutputsParams")
      .def(py::init<>())
      .def_readwrite("json", &StructuredOutputsParams::json)
      .def_readwrite("regex", &StructuredOutputsParams::regex)
      .def_readwrite("choice", &StructuredOutputsParams::choice)
      .def_readwrite("grammar", &StructuredOutputsParams::grammar)
      .def_readwrite("json_object", &StructuredOutputsParams::json_object)
      .def_readwrite("structural_tag", &StructuredOutputsParams::structural_tag)
      .def_readwrite("disable_any_whitespace", &StructuredOutputsParams::disable_any_whitespace)
      .def_readwrite("disable_additional_properties", &StructuredOutputsParams::disable_additional_properties)
      .def_readwrite("whitespace_pattern", &StructuredOutputsParams::whitespace_pattern);

  py::class_<SamplingParams>(m, "SamplingParams")
      .def(py::init<>())
      .def_readwrite("n", &SamplingParams::n)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("stop", &SamplingParams::stop)
      .def_readwrite("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_readwrite("include_stop_str_in_output", &SamplingParams::include_stop_str_in_output)
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("min_tokens", &SamplingParams::min_tokens)
      .def_readwrite("logprobs", &SamplingParams::logprobs)
      .def_readwrite("prompt_logprobs", &SamplingParams::prompt_logprobs)
      .def_readwrite("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def_readwrite("logit_bias", &SamplingParams::logit_bias)
      .def_readwrite("allowed_token_ids", &SamplingParams::allowed_token_ids)
      .def_readwrite("bad_words", &SamplingParams::bad_words)
      .def_readwrite("truncate_prompt_tokens", &SamplingParams::truncate_prompt_tokens)
      .def_readwrite("truncation_side", &SamplingParams::truncation_side)
      .def_readwrite("cache_salt", &SamplingParams::cache_salt)
      .def_readwrite("logprob_token_ids", &SamplingParams::logprob_token_ids)
      .def_readwrite("structured_outputs", &SamplingParams::structured_outputs)
      .def("validate", &SamplingParams::validate, py::arg("vocab_size") = INT64_MAX,
           py::arg("max_logprobs") = INT64_MAX, "Raises ValueError naming the first field out of range");

  // The public PromptInput; the chat fields are JSON text (the Python layer's json.dumps).
  py::class_<PromptInput>(m, "Prompt")
      .def(py::init<>())
      .def_readwrite("text", &PromptInput::text)
      .def_readwrite("token_ids", &PromptInput::token_ids)
      .def_readwrite("messages_json", &PromptInput::messages)
      .def_readwrite("tools_json", &PromptInput::tools)
      .def_readwrite("chat_template_kwargs_json", &PromptInput::chat_template_kwargs)
      .def_readwrite("add_generation_prompt", &PromptInput::add_generation_prompt)
      .def_readwrite("continue_final_message", &PromptInput::continue_final_message)
      .def_readwrite("add_special_tokens", &PromptInput::add_special_tokens);

  py::class_<TokenLogprob>(m, "TokenLogprob")
      .def_readonly("token_id", &TokenLogprob::token_id)
      .def_readonly("logprob", &TokenLogprob::logprob)
      .def_readonly("rank", &TokenLogprob::rank)
      .def_readonly("decoded_token", &TokenLogprob::decoded_token)
      .def_property_readonly("bytes", [](const TokenLogprob& t) { return py::bytes(t.bytes); });
  py::class_<SampledToken>(m, "SampledToken")
      .def_readonly("token", &SampledToken::token)
      .def_readonly("top_logprobs", &SampledToken::top_logprobs);
  // include/ditto/request_output.h; ditto/outputs.py turns it into vLLM's numpy array.
  py::class_<RoutedExperts>(m, "RoutedExperts")
      .def_readonly("num_tokens", &RoutedExperts::num_tokens)
      .def_readonly("num_moe_layers", &RoutedExperts::num_moe_layers)
      .def_readonly("num_experts_per_tok", &RoutedExperts::num_experts_per_tok)
      .def_readonly("num_experts", &RoutedExperts::num_experts)
      // [num_tokens, num_moe_layers, num_experts_per_tok] uint16 ids as little-endian bytes (one copy,
      // no Python int per id)
      .def_property_readonly("expert_ids", [](const RoutedExperts& r) {
        static_assert(std::endian::native == std::endian::little);
        return py::bytes(reinterpret_cast<const char*>(r.expert_ids.data()), r.expert_ids.size() * sizeof(uint16_t));
      });
  py::class_<CompletionOutput>(m, "CompletionOutput")
      .def_readonly("index", &CompletionOutput::index)
      .def_readonly("text", &CompletionOutput::text)
      .def_readonly("token_ids", &CompletionOutput::token_ids)
      .def_readonly("logprobs", &CompletionOutput::logprobs)
      .def_readonly("cumulative_logprob", &CompletionOutput::cumulative_logprob)
      .def_readonly("finish_reason", &CompletionOutput::finish_reason)
      .def_readonly("stop_token_id", &CompletionOutput::stop_token_id)
      .def_readonly("stop_string", &CompletionOutput::stop_string)
      .def_readonly("finish_message", &CompletionOutput::finish_message)
      // [(first_token, weight_version), ...]: the versions its tokens came from (docs/RL.md).
      .def_property_readonly("weight_versions",
                             [](const CompletionOutput& c) {
                               std::vector<std::pair<int64_t, std::string>> spans;
                               for (const WeightVersionSpan& s : c.weight_versions)
                                 spans.emplace_back(s.first_token, s.weight_version);
                               return spans;
                             })
      .def_readonly("routed_experts", &CompletionOutput::routed_experts);
  py::class_<RequestOutput>(m, "RequestOutput")
      .def_readonly("request_id", &RequestOutput::request_id)
      .def_readonly("prompt", &RequestOutput::prompt)
      .def_readonly("prompt_token_ids", &RequestOutput::prompt_token_ids)
      .def_readonly("prompt_logprobs", &RequestOutput::prompt_logprobs)
      .def_readonly("outputs", &RequestOutput::outputs)
      .def_readonly("seed", &RequestOutput::seed)
      .def_readonly("num_cached_tokens", &RequestOutput::num_cached_tokens)
      .def_readonly("weight_version", &RequestOutput::weight_version)
      .def_readonly("finished", &RequestOutput::finished)
      .def_readonly("pooled", &RequestOutput::pooled);

  // include/ditto/pooling.h; None leaves a field to the model's default.
  py::class_<PoolingParams>(m, "PoolingParams")
      .def(py::init<>())
      .def_readwrite("task", &PoolingParams::task)
      .def_readwrite("dimensions", &PoolingParams::dimensions)
      .def_readwrite("normalize", &PoolingParams::normalize)
      .def_readwrite("use_activation", &PoolingParams::use_activation)
      .def_readwrite("truncate_prompt_tokens", &PoolingParams::truncate_prompt_tokens);
  py::class_<PoolingRequestOutput>(m, "PoolingRequestOutput")
      .def_readonly("request_id", &PoolingRequestOutput::request_id)
      .def_readonly("prompt", &PoolingRequestOutput::prompt)
      .def_readonly("prompt_token_ids", &PoolingRequestOutput::prompt_token_ids)
      .def_readonly("data", &PoolingRequestOutput::data)
      .def_readonly("num_cached_tokens", &PoolingRequestOutput::num_cached_tokens)
      .def_readonly("finished", &PoolingRequestOutput::finished);

  py::class_<BeamSearchParams>(m, "BeamSearchParams")
      .def(py::init<>())
      .def_readwrite("beam_width", &BeamSearchParams::beam_width)
      .def_readwrite("max_tokens", &BeamSearchParams::max_tokens)
      .def_readwrite("ignore_eos", &BeamSearchParams::ignore_eos)
      .def_readwrite("temperature", &BeamSearchParams::temperature)
      .def_readwrite("length_penalty", &BeamSearchParams::length_penalty)
      .def_readwrite("include_stop_str_in_output", &BeamSearchParams::include_stop_str_in_output);
  py::class_<BeamSearchSequence>(m, "BeamSearchSequence")
      .def_readonly("tokens", &BeamSearchSequence::tokens)
      .def_readonly("num_prompt_tokens", &BeamSearchSequence::num_prompt_tokens)
      .def_readonly("logprobs", &BeamSearchSequence::logprobs)
      .def_readonly("cum_logprob", &BeamSearchSequence::cum_logprob)
      .def_readonly("score", &BeamSearchSequence::score)
      .def_readonly("text", &BeamSearchSequence::text)
      .def_readonly("finish_reason", &BeamSearchSequence::finish_reason);
  py::class_<BeamSearchOutput>(m, "BeamSearchOutput").def_readonly("sequences", &BeamSearchOutput::sequences);

  py::class_<PyLLM>(m, "Engine")
      .def(py::init<const EngineArgs&>(), py::arg("args"))
      .def("generate", &PyLLM::generate, py::arg("prompts"), py::arg("params"), py::arg("request_ids"),
           py::arg("rest_of_context"), py::arg("on_step") = py::none(),
           py::arg("pooling") = std::vector<PoolingParams>{})
      .def("score", &PyLLM::score, py::arg("text_1"), py::arg("text_2"), py::arg("params"),
           py::arg("chat_template_kwargs") = "")
      .def("beam_search", &PyLLM::beam_search, py::arg("prompts"), py::arg("params"), py::arg("seed") = 0)
      .def("reset_prefix_cache", &PyLLM::reset_prefix_cache)
      .def("init_weight_transfer_engine", &PyLLM::init_weight_transfer_engine, py::arg("init_info_json"))
      .def("start_weight_update", &PyLLM::start_weight_update)
      .def("update_weights_shm", &PyLLM::update_weights_shm, py::arg("update_info_json"))
      .def("update_weights_buffers", &PyLLM::update_weights_buffers, py::arg("names"), py::arg("dtype_names"),
           py::arg("shapes"), py::arg("buffers"))
      .def("finish_weight_update", &PyLLM::finish_weight_update, py::arg("weight_version") = "")
      .def("cancel_weight_update", [](PyLLM& l) { l.llm().cancel_weight_update(); })
      .def_property_readonly("weight_version", &PyLLM::weight_version)
      .def(
          "sleep", [](PyLLM& l, int level) { l.llm().sleep(level); }, py::arg("level"))
      .def("wake_up", [](PyLLM& l) { l.llm().wake_up(); })
      .def_property_readonly("is_sleeping", [](PyLLM& l) { return l.llm().is_sleeping(); })
      .def("encode", &PyLLM::encode, py::arg("text"), py::arg("add_special_tokens") = true)
      .def("decode", &PyLLM::decode, py::arg("ids"), py::arg("skip_special_tokens") = true)
      .def("render_chat", &PyLLM::render_chat, py::arg("prompt"))
      .def("id_to_token", &PyLLM::id_to_token, py::arg("id"))
      .def("token_to_id", &PyLLM::token_to_id, py::arg("token"))
      .def_property_readonly("bos_token_id", &PyLLM::bos_token_id)
      .def_property_readonly("tokenizer_config_json", &PyLLM::tokenizer_config_json)
      .def_property_readonly("has_tokenizer", &PyLLM::has_tokenizer)
      .def_property_readonly("vocab_size", &PyLLM::vocab_size)
      .def_property_readonly("max_model_len", &PyLLM::max_model_len)
      .def_property_readonly("eos_token_ids", &PyLLM::eos_token_ids)
      .def_property_readonly("model_dir", &PyLLM::model_dir)
      .def_property_readonly("system_fingerprint", &PyLLM::system_fingerprint)
      // The model's pooling (ModelInfo): runner "pooling" or "generate", pooling_task "embed" /
      // "score" ("" when generating), pooling_type "LAST" / "MEAN" / "CLS", hidden_size.
      .def_property_readonly("runner", [](const PyLLM& l) { return l.model_info().runner; })
      .def_property_readonly("pooling_task", [](const PyLLM& l) { return l.model_info().pooling_task; })
      .def_property_readonly("pooling_type", [](const PyLLM& l) { return l.model_info().pooling_type; })
      .def_property_readonly("hidden_size", [](const PyLLM& l) { return l.model_info().hidden_size; })
      .def_property_readonly("args", &PyLLM::args)
      .def("generation_defaults", &PyLLM::generation_defaults);

  // A request's reports from the engine thread; get(timeout_s) waits with the GIL released.
  py::class_<RequestStream, std::shared_ptr<RequestStream>>(m, "RequestStream")
      .def(
          "get",
          [](RequestStream& s, double timeout_s) {
            py::gil_scoped_release release;
            return s.get(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
          },
          py::arg("timeout_s"))
      .def_property_readonly("finished", &RequestStream::finished)
      .def_property_readonly("request_id", &RequestStream::request_id);

  py::class_<PyAsyncLLM>(m, "AsyncEngine")
      .def(py::init<PyLLM&>(), py::arg("llm"), py::keep_alive<1, 2>())
      .def("add_request", &PyAsyncLLM::add_request, py::arg("request_id"), py::arg("prompt"), py::arg("params"),
           py::arg("kind"), py::arg("rest_of_context"))
      .def("abort", &PyAsyncLLM::abort, py::arg("request_id"))
      .def("reset_prefix_cache", &PyAsyncLLM::reset_prefix_cache)
      .def(
          "pause_generation", [](PyAsyncLLM& a, const std::string& mode) { a.pause_generation(mode); }, py::arg("mode"))
      .def("resume_generation", [](PyAsyncLLM& a) { a.resume_generation(); })
      .def_property_readonly("is_paused", [](PyAsyncLLM& a) { return a.is_paused(); })
      .def(
          "finish_weight_update", [](PyAsyncLLM& a, const std::string& v) { a.finish_weight_update(v); },
          py::arg("weight_version"))
      .def_property_readonly("num_unfinished", &PyAsyncLLM::num_unfinished);

  m.def("derived_seed", &derived_seed, py::arg("seed"), py::arg("k"),
        "The seed of the k-th unseeded request of a front end seeded with `seed` (include/ditto/sampling_params.h)");
  m.attr("__version__") = DITTO_VERSION;
}
