// vLLM's speculative_config JSON read into a checked config (defaults, and errors that name the
// key), and prompt lookup's guesses on hand-made token runs.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

std::string error_of(const std::string& json) {
  try {
    parse_speculative_config(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(SpeculativeConfigTest, ReadsVllmKeysAndDefaults) {
  EXPECT_FALSE(parse_speculative_config("").enabled());
  EXPECT_FALSE(parse_speculative_config("{}").enabled());
  SpeculativeConfig c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4})");
  EXPECT_EQ(c.method, "ngram");
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 5);  // vLLM's default when neither bound is given
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 3);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 4,
          "disable_by_batch_size": 8})");
  EXPECT_EQ(c.prompt_lookup_min, 1);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  EXPECT_EQ(c.disable_by_batch_size, 8);
  c = parse_speculative_config(R"({"model": "/models/qwen3-0.6b", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.method, "draft_model");
  EXPECT_EQ(c.model, "/models/qwen3-0.6b");
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "model": null})");
  EXPECT_EQ(c.method, "ngram");
}

TEST(SpeculativeConfigTest, BadConfigsAreRefusedByName) {
  EXPECT_EQ(error_of("[1]"), "speculative_config: must be a JSON object, got [1]");
  EXPECT_NE(error_of("{"), "accepted");
  EXPECT_EQ(error_of(R"({"method": "eagle", "num_speculative_tokens": 2})"),
            "speculative_config: method must be \"ngram\" or \"draft_model\", got \"eagle\"");
  EXPECT_EQ(error_of(R"({"method": "ngram"})"), "speculative_config: num_speculative_tokens is required");
  EXPECT_EQ(error_of(R"({"method": "ngram", "num_speculative_tokens": 0})"),
            "speculative_config: field 'num_speculative_tokens' must be an integer in [1, 32], got 0");
  EXPECT_EQ(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4,
                         "prompt_lookup_max": 2})"),
            "speculative_config: need 1 <= prompt_lookup_min <= prompt_lookup_max <= 1024, got 4 and 2");
  EXPECT_TRUE(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1})")
                  .starts_with("speculative_config: unknown key 'draft_tensor_parallel_size'"));
  EXPECT_EQ(error_of(R"({"method": "draft_model", "num_speculative_tokens": 2})"),
            "speculative_config: method \"draft_model\" needs \"model\" (the draft model's path)");
  EXPECT_EQ(error_of(R"({"model": "d", "num_speculative_tokens": 2, "prompt_lookup_max": 3})"),
            "speculative_config: prompt_lookup_min and prompt_lookup_max are for method \"ngram\", not a draft model");
  EXPECT_EQ(error_of(R"({"method": "ngram", "model": "d", "num_speculative_tokens": 2})"),
            "speculative_config: method \"ngram\" takes no \"model\"");
  EXPECT_EQ(error_of(R"({"num_speculative_tokens": 2})"),
            "speculative_config: num_speculative_tokens and prompt_lookup_* need a method (\"ngram\") or a draft "
            "model (\"model\")");
  EXPECT_EQ(error_of(R"({"method": "ngram", "num_speculative_tokens": "2"})"),
            "speculative_config: field 'num_speculative_tokens' must be an integer in [1, 32], got \"2\"");
}

TEST(NgramProposerTest, ProposesWhatFollowedTheLatestLongestMatch) {
  using V = std::vector<int32_t>;
  // The suffix [7, 8] last occurred at 4..5, followed by 9, 1.
  const V t = {7, 8, 5, 6, 7, 8, 9, 1, 2, 7, 8};
  EXPECT_EQ(NgramProposer::lookup(t, 1, 2, 2), (V{9, 1}));
  EXPECT_EQ(NgramProposer::lookup(t, 1, 2, 10), (V{9, 1, 2, 7, 8}));  // up to the end of the sequence
  // A longer suffix wins over a later shorter one: [1, 2, 3] at 0 beats [2, 3] at 5.
  const V u = {1, 2, 3, 4, 5, 2, 3, 6, 1, 2, 3};
  EXPECT_EQ(NgramProposer::lookup(u, 2, 3, 1), (V{4}));
  EXPECT_EQ(NgramProposer::lookup(u, 2, 2, 1), (V{6}));
  // No recurring suffix in the range: nothing.
  EXPECT_TRUE(NgramProposer::lookup(V{1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(NgramProposer::lookup(V{1, 2, 3, 1, 2}, 3, 3, 4).empty());
  EXPECT_TRUE(NgramProposer::lookup(V{5}, 1, 1, 4).empty());
  // A run repeats itself.
  EXPECT_EQ(NgramProposer::lookup(V{4, 4, 4}, 1, 2, 3), (V{4}));
  // Only the last kLookupWindow tokens are searched: an occurrence before them is not found.
  V long_run(static_cast<size_t>(NgramProposer::kLookupWindow) + 10);
  for (size_t i = 0; i < long_run.size(); ++i) long_run[i] = static_cast<int32_t>(1000 + i);
  long_run[0] = 7;
  long_run[1] = 8;
  long_run.push_back(7);
  long_run.push_back(8);
  EXPECT_TRUE(NgramProposer::lookup(long_run, 2, 2, 3).empty());
  long_run[long_run.size() - 100] = 7;
  long_run[long_run.size() - 99] = 8;
  EXPECT_EQ(NgramProposer::lookup(long_run, 2, 2, 1), (V{long_run[long_run.size() - 98]}));
}

}  // namespace
}  // namespace ditto
