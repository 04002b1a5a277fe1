#include "engine/output_processor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ditto {

struct OutputProcessor::Request {
  RequestOutput out;
  SamplingParams params;
  std::vector<std::unique_ptr<IncrementalDetokenizer>> detok;  // by choice (null without tokenizer)
  ChatOutputParsers parsers;
  std::vector<ChatOutputParser> message;  // kDelta with parsers on: by choice, fed the reported text
  int64_t unfinished = 0;
  // kDelta ledger: what earlier reports carried.
  struct Sent {
    size_t tokens = 0;
    size_t text = 0;  // bytes
    bool finish = false;
  };
  std::vector<Sent> sent;  // by choice
  bool sent_prompt = false;
  bool sent_prompt_logprobs = false;
  size_t stop_holdback = 0;  // bytes of unfinished text withheld: a stop string may still cut them
  bool cached_tokens_set = false;
};

OutputProcessor::OutputProcessor(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}
OutputProcessor::~OutputProcessor() = default;

void OutputProcessor::add(int64_t key, const EngineRequest& r) {
  DITTO_CHECK(r.params.seed.has_value()) << "request '" << r.request_id << "' reached the engine without a seed";
  auto req = std::make_unique<Request>();
  req->params = r.params;
  req->out.request_id = r.request_id;
  req->out.prompt = r.prompt;
  req->out.prompt_token_ids = r.prompt_token_ids;
  req->out.seed = *r.params.seed;
  req->out.weight_version = weight_version_;
  if (r.params.prompt_logprobs) req->out.prompt_logprobs.resize(r.prompt_token_ids.size());
  req->out.outputs.resize(static_cast<size_t>(r.params.n));
  req->unfinished = r.params.n;
  req->sent.resize(static_cast<size_t>(r.params.n));
  req->parsers = r.output_parsers;
  if (r.output_parsers.any()) req->message.assign(static_cast<size_t>(r.params.n), ChatOutputParser(r.output_parsers));
  if (!r.params.include_stop_str_in_output)
    for (const std::string& stop : r.params.stop) req->stop_holdback = std::max(req->stop_holdback, stop.size() - 1);
  for (int64_t i = 0; i < r.params.n; ++i) {
    req->out.outputs[static_cast<size_t>(i)].index = i;
    req->detok.push_back(
        tokenizer_ ? std::make_unique<IncrementalDetokenizer>(*tokenizer_, r.params.skip_special_tokens) : nullptr);
  }
  requests_[key] = std::move(req);
}

void OutputProcessor::fill_text(TokenLogprob& t) const {
  if (tokenizer_ == nullptr) return;
  const int32_t ids[1] = {t.token_id};
  t.decoded_token = tokenizer_->decode(ids, /*skip_special_tokens=*/false);
  t.bytes = tokenizer_->token_bytes(t.token_id);
}

bool OutputProcessor::append_token(int64_t key, int64_t choice, int64_t position, SampledToken&& s) {
  Request& req = *requests_.at(key);
  const SamplingParams& p = req.params;
  CompletionOutput& out = req.out.outputs[static_cast<size_t>(choice)];
  const int32_t token = s.token.token_id;
  if (out.weight_versions.empty() || out.weight_versions.back().weight_version != weight_version_)
    out.weight_versions.push_back({static_cast<int64_t>(out.token_ids.size()), weight_version_});
  req.out.weight_version = weight_version_;
  out.token_ids.push_back(token);
  out.cumulative_logprob += static_cast<double>(s.token.logprob);
  if (p.logprobs) {
    fill_text(s.token);
    for (TokenLogprob& t : s.top_logprobs) fill_text(t);
    out.logprobs.push_back(std::move(s));
  }
  auto& d = req.detok[static_cast<size_t>(choice)];
  if (!d) return false;
  const size_t before = out.text.size();
  out.text += d->add(token);
  // Stop strings on the text, earliest match first; only new text can complete one.
  if (position + 1 <= p.min_tokens) return false;
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& stop : p.stop) {
    const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
    const size_t at = out.text.find(stop, from);
    if (at != std::string::npos && at < best) {
      best = at;
      which = &stop;
    }
  }
  if (which == nullptr) return false;
  out.text.resize(best + (p.include_stop_str_in_output ? which->size() : 0));
  out.stop_string = *which;
  return true;
}

void OutputProcessor::finish(int64_t key, int64_t choice, FinishReason reason, std::optional<int32_t> stop_token_id,
                             std::optional<std::string> message) {
  Request& req = *requests_.at(key);
  CompletionOutput& out = req.out.outputs[static_cast<size_t>(choice)];
  DITTO_CHECK(out.finish_reason.empty()) << "choice " << choice << " of '" << req.out.request_id << "' finished twice";
  out.finish_reason = reason == FinishReason::kLength  ? "length"
                      : reason == FinishReason::kAbort ? "abort"
                      : reason == FinishReason::kError ? "error"
                                                       : "stop";
  out.stop_token_id = stop_token_id;
  out.finish_message = std::move(message);
  if (auto& d = req.detok[static_cast<size_t>(choice)]; d && !out.stop_string) out.text += d->finish();
  --req.unfinished;
}

bool OutputProcessor::wants_prompt_logprob(int64_t key, int64_t position) const {
  const Request& req = *requests_.at(key);
  return position < static_cast<int64_t>(req.out.prompt_logprobs.size()) &&
         !req.out.prompt_logprobs[static_cast<size_t>(position)].has_value();
}

void OutputProcessor::set_prompt_logprob(int64_t key, int64_t position, SampledToken&& s) {
  fill_text(s.token);
  for (TokenLogprob& t : s.top_logprobs) fill_text(t);
  requests_.at(key)->out.prompt_logprobs[static_cast<size_t>(position)] = std::move(s);
}

void OutputProcessor::set_num_cached_tokens(int64_t key, int64_t num_cached_tokens) {
  Request& req = *requests_.at(key);
  if (!req.cached_tokens_set && num_cached_tokens >= 0) {
    req.out.num_cached_tokens = num_cached_tokens;
    req.cached_tokens_set = true;
  }
}

bool OutputProcessor::finished(int64_t key) const { return requests_.at(key)->unfinished == 0; }

std::optional<RequestOutput> OutputProcessor::take_delta(Request& req) const {
  RequestOutput d;
  d.request_id = req.out.request_id;
  d.num_cached_tokens = req.out.num_cached_tokens;
  d.weight_version = req.out.weight_version;
  d.finished = req.unfinished == 0;
  bool any = d.finished;
  if (!req.sent_prompt) {
    d.prompt = req.out.prompt;
    d.prompt_token_ids = req.out.prompt_token_ids;
    d.seed = req.out.seed;
  }
  if (req.params.prompt_logprobs && !req.sent_prompt_logprobs) {
    const auto& pl = req.out.prompt_logprobs;
    if (std::all_of(pl.begin() + 1, pl.end(), [](const auto& e) { return e.has_value(); })) {
      d.prompt_logprobs = pl;
      req.sent_prompt_logprobs = any = true;
    } else if (!d.finished) {
      return std::nullopt;  // the first report carries them: the outputs wait (a choice may run ahead)
    }
  }
  for (size_t i = 0; i < req.out.outputs.size(); ++i) {
    const CompletionOutput& o = req.out.outputs[i];
    Request::Sent& sent = req.sent[i];
    CompletionOutput c;
    c.index = o.index;
    c.cumulative_logprob = o.cumulative_logprob;
    c.token_ids.assign(o.token_ids.begin() + static_cast<std::ptrdiff_t>(sent.tokens), o.token_ids.end());
    if (sent.tokens < o.logprobs.size())
      c.logprobs.assign(o.logprobs.begin() + static_cast<std::ptrdiff_t>(sent.tokens), o.logprobs.end());
    // The spans of the new tokens: the one the first new token is in, and any that start later.
    const auto new_tokens = static_cast<int64_t>(sent.tokens);
    for (size_t s = 0; s < o.weight_versions.size(); ++s) {
      const bool last = s + 1 == o.weight_versions.size();
      if (static_cast<size_t>(new_tokens) < o.token_ids.size() &&
          (last || o.weight_versions[s + 1].first_token > new_tokens))
        c.weight_versions.push_back(
            {std::max(o.weight_versions[s].first_token, new_tokens), o.weight_versions[s].weight_version});
    }
    const bool finished = !o.finish_reason.empty();
    size_t end = o.text.size();
    if (!finished) {
      end = end > req.stop_holdback ? end - req.stop_holdback : 0;
      while (end > sent.text && (static_cast<unsigned char>(o.text[end]) & 0xC0) == 0x80) --end;  // whole characters
    }
    if (end > sent.text) c.text = o.text.substr(sent.text, end - sent.text);
    const bool finishing = finished && !sent.finish;
    if (finishing) {
      c.finish_reason = o.finish_reason;
      c.stop_token_id = o.stop_token_id;
      c.stop_string = o.stop_string;
      c.finish_message = o.finish_message;
      c.routed_experts = o.routed_experts;
      sent.finish = true;
    }
    // The same parser sees every piece of the text once, in order, and the end.
    if (req.parsers.any() && (!c.text.empty() || finishing)) c.message = req.message[i].feed(c.text, finishing);
    any = any || !c.token_ids.empty() || !c.text.empty() || !c.finish_reason.empty();
    sent.tokens = o.token_ids.size();
    sent.text = std::max(sent.text, end);
    d.outputs.push_back(std::move(c));
  }
  if (!any) return std::nullopt;
  req.sent_prompt = true;
  return d;
}

void OutputProcessor::set_routed_experts(int64_t key, int64_t choice, RoutedExperts routed_experts) {
  requests_.at(key)->out.outputs[static_cast<size_t>(choice)].routed_experts = std::move(routed_experts);
}

void OutputProcessor::set_pooled(int64_t key, std::vector<float> pooled) {
  Request& req = *requests_.at(key);
  req.out.pooled = std::move(pooled);
  req.out.weight_version = weight_version_;
}

std::vector<RequestOutput> OutputProcessor::report(std::span<const int64_t> keys) {
  std::vector<RequestOutput> done;
  for (int64_t key : keys) {
    const auto found = requests_.find(key);
    if (found == requests_.end()) continue;
    Request& req = *found->second;
    if (req.params.output_kind == RequestOutputKind::kDelta) {
      if (std::optional<RequestOutput> d = take_delta(req)) done.push_back(std::move(*d));
    } else if (req.unfinished == 0) {
      req.out.finished = true;
      if (req.parsers.any())
        for (CompletionOutput& c : req.out.outputs)
          c.message = parse_chat_output(c.text, /*finished=*/true, req.parsers);
      done.push_back(std::move(req.out));
    }
    if (req.unfinished == 0) requests_.erase(found);
  }
  return done;
}

void append_delta(RequestOutput& acc, RequestOutput&& delta) {
  if (acc.request_id.empty()) acc.request_id = delta.request_id;
  acc.num_cached_tokens = delta.num_cached_tokens;
  if (!delta.weight_version.empty()) acc.weight_version = delta.weight_version;
  if (!delta.prompt_token_ids.empty()) {
    acc.prompt = std::move(delta.prompt);
    acc.prompt_token_ids = std::move(delta.prompt_token_ids);
    acc.seed = delta.seed;
  }
  if (!delta.prompt_logprobs.empty()) acc.prompt_logprobs = std::move(delta.prompt_logprobs);
  for (CompletionOutput& d : delta.outputs) {
    if (acc.outputs.size() <= static_cast<size_t>(d.index)) acc.outputs.resize(static_cast<size_t>(d.index) + 1);
    CompletionOutput& o = acc.outputs[static_cast<size_t>(d.index)];
    o.index = d.index;
    o.text += d.text;
    for (WeightVersionSpan& span : d.weight_versions)
      if (o.weight_versions.empty() || o.weight_versions.back().weight_version != span.weight_version)
        o.weight_versions.push_back(std::move(span));
    o.token_ids.insert(o.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    for (SampledToken& t : d.logprobs) o.logprobs.push_back(std::move(t));
    o.cumulative_logprob = d.cumulative_logprob;
    if (d.message) {
      if (!o.message) o.message.emplace();
      o.message->reasoning += d.message->reasoning;
      o.message->content += d.message->content;
      for (ToolCall& call : d.message->tool_calls) o.message->tool_calls.push_back(std::move(call));
    }
    if (!d.finish_reason.empty()) {
      o.finish_reason = d.finish_reason;
      o.stop_token_id = d.stop_token_id;
      o.stop_string = d.stop_string;
      o.finish_message = d.finish_message;
    }
    if (d.routed_experts) o.routed_experts = std::move(d.routed_experts);
  }
  acc.finished = delta.finished;
}

}  // namespace ditto
