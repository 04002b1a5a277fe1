#include "server/rl_api.h"

#include <array>
#include <utility>

#include "core/base64.h"
#include "core/error.h"
#include "core/json_fields.h"
#include "engine/llm_engine.h"
#include "server/async_engine.h"

namespace ditto {
namespace {

using Json = RlApi::Json;

// A body's keys must be among `known` (a misspelled field is refused, never ignored).
void check_keys(const Json& body, std::initializer_list<const char*> known, const std::string& route) {
  if (body.is_null()) return;
  if (!body.is_object()) throw_invalid_argument(route + ": the request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) throw_invalid_field(key, route + ": field '" + key + "' is not supported");
  }
}

}  // namespace

bool is_rl_post_route(const std::string& path) {
  static constexpr const char* kRoutes[] = {"/pause",
                                            "/resume",
                                            "/abort_requests",
                                            "/sleep",
                                            "/wake_up",
                                            "/init_weight_transfer_engine",
                                            "/start_weight_update",
                                            "/update_weights",
                                            "/finish_weight_update"};
  for (const char* route : kRoutes)
    if (path == route) return true;
  return false;
}

RlApi::RlApi(LLMEngine& llm, AsyncEngine& engine, ResolveIds resolve)
    : llm_(llm), engine_(engine), resolve_(std::move(resolve)) {}
RlApi::~RlApi() = default;

Json RlApi::pause(const std::string& mode) {
  std::lock_guard lock(mu_);
  engine_.pause(mode);
  return {{"is_paused", true}, {"mode", mode}};
}

Json RlApi::resume() {
  std::lock_guard lock(mu_);
  if (sleep_level_ > 0)
    throw_invalid_argument("resume: the server is sleeping (level " + std::to_string(sleep_level_) +
                           "); wake it with POST /wake_up");
  engine_.resume();
  return {{"is_paused", false}};
}

Json RlApi::is_paused() const { return {{"is_paused", engine_.is_paused()}}; }

Json RlApi::abort_requests(const Json& body) {
  check_keys(body, {"request_ids", "abort_all"}, "abort_requests");
  const bool all = body.is_object() && body.contains("abort_all") && json_bool(body["abort_all"], "abort_all");
  if (all) {
    engine_.abort_group("");
    return {{"aborted", "all"}};
  }
  if (!body.is_object() || !body.contains("request_ids"))
    throw_invalid_field("request_ids",
                        "abort_requests: field 'request_ids' (a list of ids) or 'abort_all' is required");
  const std::vector<std::string> ids = json_strings(body["request_ids"], "request_ids");
  for (const std::string& id : ids) {
    if (id.empty()) throw_invalid_field("request_ids", "abort_requests: field 'request_ids' holds an empty id");
    const std::vector<std::string> engine_ids = resolve_ ? resolve_(id) : std::vector<std::string>{};
    if (engine_ids.empty()) engine_.abort_group(id);  // an engine id itself
    for (const std::string& e : engine_ids) engine_.abort_group(e);
  }
  return {{"aborted", ids}};
}

Json RlApi::sleep(int64_t level) {
  if (level != 1 && level != 2)
    throw_invalid_field("level", "sleep: field 'level' must be 1 or 2, got " + std::to_string(level));
  if (level == 2 && !llm_.weights_updatable())
    throw_invalid_field("level",
                        "sleep: level 2 drops the weights, and a model loaded from GGUF cannot be sent new ones "
                        "(weight updates need a Hugging Face directory); use level 1");
  std::lock_guard lock(mu_);
  if (sleep_level_ >= level) return {{"is_sleeping", true}, {"level", sleep_level_}};
  engine_.pause("abort");
  engine_.run_stopped([&] {
    engine_.release_memory_stopped();
    if (level == 2) llm_.drop_weights();
  });
  sleep_level_ = level;
  return {{"is_sleeping", true}, {"level", level}};
}

Json RlApi::wake_up() {
  std::lock_guard lock(mu_);
  if (sleep_level_ == 0) return {{"is_sleeping", false}};
  if (llm_.weights_dropped())
    throw_invalid_argument(
        "wake_up: sleep level 2 dropped the weights; send every tensor (start_weight_update, update_weights, "
        "finish_weight_update) before waking");
  sleep_level_ = 0;
  engine_.resume();
  return {{"is_sleeping", false}};
}

Json RlApi::is_sleeping() const {
  std::lock_guard lock(mu_);
  return {{"is_sleeping", sleep_level_ > 0}, {"level", sleep_level_}};
}

Json RlApi::init_weight_transfer_engine(const Json& body) {
  check_keys(body, {"init_info"}, "init_weight_transfer_engine");
  if (!body.is_object() || !body.contains("init_info"))
    throw_invalid_field("init_info", "init_weight_transfer_engine: field 'init_info' ({\"path\": FILE}) is required");
  std::lock_guard lock(mu_);
  llm_.init_weight_transfer_engine(parse_shm_init_info(body["init_info"]));
  return {{"backend", "shm"}, {"path", body["init_info"]["path"]}};
}

Json RlApi::start_weight_update() {
  std::lock_guard lock(mu_);
  llm_.start_weight_update();
  spill_.reset();
  return {{"update_in_progress", true}};
}

Json RlApi::update_weights(const Json& body) {
  try {
    return stage(body);
  } catch (const Error& e) {
    // Whatever was wrong with the chunk (its body, its bytes, a tensor), the update is cancelled,
    // so a trainer never finishes an update missing a chunk it believes sent.
    std::lock_guard lock(mu_);
    if (!llm_.weight_update_in_progress()) throw;
    llm_.cancel_weight_update();
    spill_.reset();
    throw Error(e.code(),
                std::string(e.what()) +
                    "; the update is cancelled (nothing of it was applied: the old weights keep serving); start again "
                    "with start_weight_update",
                e.param());
  }
}

Json RlApi::stage(const Json& body) {
  check_keys(body, {"update_info"}, "update_weights");
  if (!body.is_object() || !body.contains("update_info"))
    throw_invalid_field("update_info", "update_weights: field 'update_info' is required");
  const Json& u = body["update_info"];
  const bool inline_data = u.is_object() && u.contains("data_base64");
  const WeightUpdateInfo info = parse_weight_update_info(u, /*need_offsets=*/!inline_data);
  std::lock_guard lock(mu_);
  if (!inline_data) {
    llm_.update_weights_from_shm(info);
    return {{"tensors", info.names.size()}};
  }
  if (!llm_.weight_update_in_progress())
    throw_invalid_argument("update_weights: no weight update in progress; call start_weight_update first");
  if (u.contains("offsets"))
    throw_invalid_field("update_info", "update_weights: give 'offsets' (the shared file) or 'data_base64', not both");
  const std::vector<std::string> data = json_strings(u["data_base64"], "update_info.data_base64");
  if (data.size() != info.names.size())
    throw_invalid_field("update_info", "update_weights: field 'update_info.data_base64' has " +
                                           std::to_string(data.size()) + " entries, but 'names' has " +
                                           std::to_string(info.names.size()));
  if (spill_ == nullptr) spill_ = std::make_unique<SpillFile>();
  std::vector<std::pair<int64_t, size_t>> placed;  // each tensor's offset and size in the spill file
  for (size_t i = 0; i < data.size(); ++i) {
    const std::string bytes = base64_decode(data[i], "update_info.data_base64[" + std::to_string(i) + "]");
    placed.emplace_back(spill_->append(bytes), bytes.size());
  }
  std::unique_ptr<MappedFile> mapping = spill_->map();
  // The byte counts as sent: WeightUpdate checks each against its shape and dtype, by name.
  std::vector<WeightTensor> tensors;
  for (size_t i = 0; i < data.size(); ++i)
    tensors.push_back(
        {info.names[i], info.dtype_names[i], info.shapes[i], mapping->data() + placed[i].first, placed[i].second});
  llm_.update_weights_mapped(tensors, std::move(mapping));
  return {{"tensors", info.names.size()}};
}

Json RlApi::finish_weight_update(const Json& body) {
  check_keys(body, {"weight_version"}, "finish_weight_update");
  const std::string version = body.is_object() && body.contains("weight_version") && !body["weight_version"].is_null()
                                  ? json_string(body["weight_version"], "weight_version")
                                  : "";
  std::lock_guard lock(mu_);
  if (!llm_.weight_update_in_progress())
    throw_invalid_argument("finish_weight_update: no weight update in progress; call start_weight_update first");
  engine_.run_stopped([&] { llm_.finish_weight_update(version); });
  spill_.reset();
  return {{"weight_version", llm_.weight_version()}};
}

Json RlApi::weight_info() const {
  std::lock_guard lock(mu_);
  return {{"weight_version", llm_.weight_version()},
          {"system_fingerprint", llm_.system_fingerprint()},
          {"update_in_progress", llm_.weight_update_in_progress()},
          {"is_paused", engine_.is_paused()},
          {"is_sleeping", sleep_level_ > 0}};
}

}  // namespace ditto
