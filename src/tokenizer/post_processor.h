// The tokenizer.json "post_processor", applied to the ids of one sequence when
// add_special_tokens is true: TemplateProcessing (e.g. Llama-3's "<|begin_of_text|> $A"),
// BertProcessing / RobertaProcessing ([CLS] $A [SEP] / <s> $A </s>), ByteLevel (offsets only, so
// nothing to do on ids), a Sequence of those, or null. Semantics follow Hugging Face tokenizers'
// processors/template.rs, bert.rs, roberta.rs and sequence.rs for a single sequence.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ditto {

class PostProcessor {
 public:
  // Parses `j` (the "post_processor" value; null means none). `where` names it in errors.
  // Throws Error(kInvalidArgument) naming an unsupported type, or a template piece that is
  // malformed or names a special token missing from its "special_tokens".
  static PostProcessor from_json(const nlohmann::json& j, const std::string& where);

  // `ids` of one sequence with the special tokens of the single-sequence template added.
  // Thread-safe.
  void apply(std::vector<int32_t>& ids) const;

  // How many ids apply() adds (0 without a post-processor).
  size_t num_added() const { return prefix_.size() + suffix_.size(); }

 private:
  void parse_into(const nlohmann::json& j, const std::string& where);

  // The processors compose into ids before and after the sequence.
  std::vector<int32_t> prefix_;
  std::vector<int32_t> suffix_;
};

}  // namespace ditto
