// The server's routes for reinforcement learning, vLLM's development routes (VLLM_SERVER_DEV_MODE=1;
// docs/RL.md): weight transfer (/init_weight_transfer_engine, /start_weight_update,
// /update_weights, /finish_weight_update, /weight_info), pausing (/pause, /resume, /is_paused),
// /abort_requests, and sleep (/sleep, /wake_up, /is_sleeping). Each handler takes the parsed body
// and query and returns the response body; errors are Error(kInvalidArgument) naming the field.
// Thread-safe: one call at a time (a mutex), beside the engine thread and every other route.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/weight_transfer.h"

namespace ditto {

class AsyncEngine;
class LLMEngine;

// True for the POST routes above, whose body is optional (POST /pause?mode=keep has none).
bool is_rl_post_route(const std::string& path);

class RlApi {
 public:
  using Json = nlohmann::ordered_json;
  // The engine ids of a response id (its prompts' requests), empty when unknown.
  using ResolveIds = std::function<std::vector<std::string>(const std::string& response_id)>;
  // `llm` and `engine` (the server's) must outlive this.
  RlApi(LLMEngine& llm, AsyncEngine& engine, ResolveIds resolve);
  ~RlApi();

  // POST /pause?mode=abort|wait|keep (default "abort", as vLLM's), POST /resume, GET /is_paused.
  Json pause(const std::string& mode);
  Json resume();
  Json is_paused() const;
  // POST /abort_requests {"request_ids": [...]} (a response's id aborts each of its prompts'
  // requests) or {"abort_all": true}: those requests end with finish_reason "abort".
  Json abort_requests(const Json& body);
  // POST /sleep?level=1|2: pauses (mode "abort") and gives back the KV cache, the activation
  // buffers and the prefix cache; level 2 also the weights' memory (their pages are dropped: the
  // next generation needs an update of every tensor first). POST /wake_up: resumes (after level 2
  // only once every tensor has been updated). GET /is_sleeping.
  Json sleep(int64_t level);
  Json wake_up();
  Json is_sleeping() const;
  // The weight-transfer calls. init_info {"path": FILE} (the shm transport); update_info with
  // "offsets" reads the tensors from that file, with "data_base64" from the body (each tensor's
  // bytes, base64); finish {"weight_version": "..."} applies them with the engine stopped at a step
  // boundary (requests kept by pause(mode="keep") go on under the new weights).
  Json init_weight_transfer_engine(const Json& body);
  Json start_weight_update();
  Json update_weights(const Json& body);
  Json finish_weight_update(const Json& body);
  // GET /weight_info: {"weight_version", "system_fingerprint", "update_in_progress", "is_paused",
  // "is_sleeping"}.
  Json weight_info() const;

 private:
  Json stage(const Json& body);  // update_weights' work; its errors cancel the update
  LLMEngine& llm_;
  AsyncEngine& engine_;
  ResolveIds resolve_;
  mutable std::mutex mu_;
  std::unique_ptr<SpillFile> spill_;  // the HTTP transport's bytes of the update in progress
  int64_t sleep_level_ = 0;           // 0: awake
};

}  // namespace ditto
