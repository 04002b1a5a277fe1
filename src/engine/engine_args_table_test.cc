// The one table of engine knobs: every row sets its EngineArgs field, refuses what is out of
// range naming the flag or keyword it came from, and reads the CLI's text as the JSON value.
#include "engine/engine_args_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "core/test_support.h"

namespace ditto {
namespace {

using nlohmann::json;
using testing::error_message;

const EngineArgField& field(const std::string& name) {
  const EngineArgField* f = find_engine_arg(name);
  EXPECT_NE(f, nullptr) << name;
  return *f;
}

TEST(EngineArgsTable, NamesAndFlagsAreUniqueAndFound) {
  std::set<std::string> names, flags;
  for (const EngineArgField& f : engine_arg_fields()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_TRUE(flags.insert(f.flag).second) << f.flag;
    EXPECT_EQ(find_engine_arg(f.name), &f);
    const std::string flag = std::string(f.flag).substr(0, std::string(f.flag).find(','));
    EXPECT_EQ(find_engine_arg(flag), &f) << flag;
    EXPECT_GT(std::string(f.help).size(), 10u) << f.name;
  }
  EXPECT_EQ(find_engine_arg("no_such_knob"), nullptr);
}

TEST(EngineArgsTable, EveryKindSetsItsField) {
  EngineArgs a;
  set_engine_arg(a, field("max_num_seqs"), json(7), "max_num_seqs");
  set_engine_arg(a, field("threads"), json(3), "threads");
  set_engine_arg(a, field("tensor_parallel_size"), json(2), "tensor_parallel_size");
  set_engine_arg(a, field("kv_cache_memory"), json("512MiB"), "kv_cache_memory");
  set_engine_arg(a, field("enable_prefix_caching"), json(false), "enable_prefix_caching");
  set_engine_arg(a, field("generation_config"), json("vllm"), "generation_config");
  set_engine_arg(a, field("speculative_config"), json::parse(R"({"method": "ngram", "num_speculative_tokens": 3})"),
                 "speculative_config");
  EXPECT_EQ(a.max_num_seqs, 7);
  EXPECT_EQ(a.threads, 3);
  EXPECT_EQ(a.tensor_parallel_size, 2);
  EXPECT_EQ(a.kv_cache_memory, int64_t{512} << 20);
  EXPECT_FALSE(a.enable_prefix_caching);
  EXPECT_EQ(a.generation_config, "vllm");
  EXPECT_EQ(a.speculative_config.method, "ngram");
  EXPECT_EQ(a.speculative_config.num_speculative_tokens, 3);
  set_engine_arg(a, field("kv_cache_memory"), json(4096), "kv_cache_memory");  // bytes as an integer
  EXPECT_EQ(a.kv_cache_memory, 4096);
  set_engine_arg(a, field("max_model_len"), json(nullptr), "max_model_len");  // null: the default stays
  EXPECT_EQ(a.max_model_len, 0);
}

TEST(EngineArgsTable, BadValuesNameWhereTheyCameFrom) {
  EngineArgs a;
  const EngineArgs before = a;
  std::string m = error_message([&] { set_engine_arg(a, field("max_num_seqs"), json(0), "--max-num-seqs"); },
                                ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("--max-num-seqs must be a positive integer"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("long_prefill_token_threshold"), json(-1), "x"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("x must be a non-negative integer"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("block_size"), json(true), "block_size"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("block_size must be an integer, got true"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("threads"), json(uint64_t{1} << 63), "threads"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("threads must be a non-negative integer at most"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("kv_cache_memory"), json("lots"), "kv_cache_memory"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("kv_cache_memory: expected a size"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("kv_cache_memory"), json(-5), "kv_cache_memory"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("kv_cache_memory must be a size"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("speculative_config"), json::parse(R"({"method": "x"})"), "sc"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("sc: "), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("enable_prefix_caching"), json(1), "enable_prefix_caching"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("true or false"), std::string::npos) << m;
  m = error_message([&] { set_engine_arg(a, field("max_logprobs"), json(nullptr), "max_logprobs"); },
                    ErrorCode::kInvalidArgument);  // None is no integer where 0 does not mean "automatic"
  EXPECT_NE(m.find("max_logprobs must be an integer, got null"), std::string::npos) << m;
  // Nothing was set by a refused value.
  EXPECT_EQ(a.max_num_seqs, before.max_num_seqs);
  EXPECT_EQ(a.kv_cache_memory, before.kv_cache_memory);
  EXPECT_TRUE(a.enable_prefix_caching);
}

TEST(EngineArgsTable, CliTextBecomesTheSameValue) {
  EXPECT_EQ(engine_arg_from_text(field("max_num_seqs"), "12", "--max-num-seqs"), json(12));
  EXPECT_EQ(engine_arg_from_text(field("kv_cache_memory"), "2GiB", "--kv-cache-memory"), json("2GiB"));
  EXPECT_EQ(engine_arg_from_text(field("speculative_config"), R"({"method": "ngram"})", "--speculative-config"),
            json::parse(R"({"method": "ngram"})"));
  for (const char* bad : {"", "12x", "1.5", " 3"}) {
    const std::string m = error_message([&] { engine_arg_from_text(field("max_num_seqs"), bad, "--max-num-seqs"); },
                                        ErrorCode::kInvalidArgument);
    EXPECT_NE(m.find("--max-num-seqs must be an integer"), std::string::npos) << m;
  }
  const std::string m =
      error_message([&] { engine_arg_from_text(field("speculative_config"), "ngram", "--speculative-config"); },
                    ErrorCode::kInvalidArgument);
  EXPECT_NE(m.find("speculative_config"), std::string::npos) << m;
}

TEST(EngineArgsTable, DefaultsShownAreTheStructsAndReadBack) {
  const EngineArgs a;
  EXPECT_EQ(field("kv_cache_memory").show(a), "2GiB");
  EXPECT_EQ(field("max_num_batched_tokens").show(a), "2048");
  EXPECT_EQ(field("generation_config").show(a), "auto");
  // What --help shows as a default is a value the flag accepts and gives the same field back.
  for (const EngineArgField& f : engine_arg_fields()) {
    if (!f.show_default || f.kind == EngineArgKind::kBool) continue;
    EngineArgs b;
    set_engine_arg(b, f, engine_arg_from_text(f, f.show(a), f.flag), f.flag);
    EXPECT_EQ(f.show(b), f.show(a)) << f.name;
  }
}

}  // namespace
}  // namespace ditto
