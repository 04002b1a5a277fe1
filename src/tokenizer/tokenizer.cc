// Encoding and decoding with a loaded Tokenizer (loading is in tokenizer_json.cc).
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/decoder.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

// Per-thread scratch of encode(): reused so that encoding allocates only its result. Each level
// of the pipeline has its own member, as they are live at the same time.
struct EncodeScratch {
  std::vector<AddedSplit> raw_splits;
  std::vector<AddedSplit> normalized_splits;
  std::string normalized;
  std::string buffer;
  std::vector<MatchSpan> pieces;
};

EncodeScratch& encode_scratch() {
  thread_local EncodeScratch s;
  return s;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    throw_invalid_argument(source_ + ": encode: the text is not valid UTF-8 (ill-formed sequence at byte offset " +
                           std::to_string(bad) + ")");
  }
  if (text.size() >= (size_t{1} << 31)) {
    throw_invalid_argument(source_ + ": encode: the text is too long (" + std::to_string(text.size()) +
                           " bytes; at most 2^31-1)");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2 + post_processor_->num_added());
  EncodeScratch& s = encode_scratch();
  s.raw_splits.clear();
  added_->split(text, /*raw_pass=*/true, s.raw_splits);
  for (const AddedSplit& split : s.raw_splits) {
    if (split.id >= 0) {
      ids.push_back(split.id);
    } else {
      encode_section(text.substr(split.begin, split.end - split.begin), split.begin == 0, ids);
    }
  }
  if (add_special_tokens) post_processor_->apply(ids);
  return ids;
}

void Tokenizer::encode_section(std::string_view section, bool at_text_start, std::vector<int32_t>& ids) const {
  if (section.empty()) return;
  EncodeScratch& s = encode_scratch();
  const std::string_view normalized = normalizer_->normalize(section, s.normalized);
  if (!added_->has_normalized_tokens()) {
    encode_normalized(normalized, at_text_start, ids);
    return;
  }
  s.normalized_splits.clear();
  added_->split(normalized, /*raw_pass=*/false, s.normalized_splits);
  for (const AddedSplit& split : s.normalized_splits) {
    if (split.id >= 0) {
      ids.push_back(split.id);
    } else {
      encode_normalized(normalized.substr(split.begin, split.end - split.begin), at_text_start && split.begin == 0,
                        ids);
    }
  }
}

void Tokenizer::encode_normalized(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  EncodeScratch& s = encode_scratch();
  s.buffer.assign(text);
  s.pieces.clear();
  s.pieces.push_back({0, static_cast<uint32_t>(text.size())});
  pre_tokenizer_->pre_tokenize(s.buffer, s.pieces, at_text_start);
  const std::string_view buffer = s.buffer;
  for (const MatchSpan& piece : s.pieces) model_->tokenize(buffer.substr(piece.begin, piece.end - piece.begin), ids);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens,
                              std::optional<bool> clean_up_tokenization_spaces) const {
  std::string joined;
  bool first = true;
  for (const int32_t id : ids) {
    const std::string* bytes = decoded_bytes(id, skip_special_tokens);
    if (bytes == nullptr) continue;
    if (!first && decoder_->joins_with_space()) joined.push_back(' ');
    joined += *bytes;
    first = false;
  }
  std::string text = decoder_->joins_with_space() ? std::move(joined) : utf8::decode_lossy(joined);
  decoder_->strip_leading(text, decoder_->strip_start());
  if (clean_up_tokenization_spaces.value_or(clean_up_tokenization_spaces_)) text = clean_up_tokenization(text);
  return text;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const std::string* bytes = decoded_bytes(id, /*skip_special_tokens=*/false);
  return bytes == nullptr ? std::string() : *bytes;
}

// ------------------------------------------------------------------------------------------------
// IncrementalDetokenizer

struct IncrementalDetokenizer::State {
  utf8::StreamDecoder utf8;
  CleanUpStream clean_up;
  std::string text;  // complete characters not yet cleaned up
  bool first = true;
  size_t strip_left = 0;  // leading characters the decoder's Strip may still remove
};

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens,
                                               std::optional<bool> clean_up_tokenization_spaces)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      clean_up_tokenization_spaces_(clean_up_tokenization_spaces.value_or(tokenizer.clean_up_tokenization_spaces_)),
      state_(std::make_unique<State>()) {
  state_->strip_left = tokenizer.decoder_->strip_start();
}

IncrementalDetokenizer::~IncrementalDetokenizer() = default;

std::string IncrementalDetokenizer::add(int32_t id) {
  const std::string* bytes = tokenizer_.decoded_bytes(id, skip_special_tokens_);
  if (bytes == nullptr) return {};
  State& s = *state_;
  s.text.clear();
  if (!tokenizer_.decoder_->joins_with_space()) {
    s.utf8.feed(*bytes, s.text);
    strip(s);
  } else {
    if (!s.first) s.text.push_back(' ');
    s.text += *bytes;
  }
  s.first = false;
  if (!clean_up_tokenization_spaces_) return s.text;
  std::string out;
  s.clean_up.feed(s.text, out);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  State& s = *state_;
  s.text.clear();
  s.utf8.finish(s.text);
  strip(s);
  std::string out;
  if (clean_up_tokenization_spaces_) {
    s.clean_up.feed(s.text, out);
    s.clean_up.finish(out);
  } else {
    out = s.text;
  }
  s.first = true;
  s.strip_left = tokenizer_.decoder_->strip_start();
  return out;
}

void IncrementalDetokenizer::strip(State& s) const {
  // The Strip applies to the first characters of the whole text; they arrive in order, so the
  // strip ends at the first character it does not remove.
  if (s.strip_left == 0 || s.text.empty()) return;
  const size_t removed = tokenizer_.decoder_->strip_leading(s.text, s.strip_left);
  s.strip_left = s.text.empty() ? s.strip_left - removed : 0;
}

}  // namespace ditto
