// The tokenizer on arbitrary bytes, two ways chosen by the first byte:
//   even: the rest is a tokenizer.json. Loading parses the JSON and builds every component
//         (normalizers, pre-tokenizers with their PCRE2 regexes, the BPE model and merges, added
//         tokens, post-processor, decoder); a tokenizer that loads then encodes and decodes a few
//         fixed texts and the ids of its own vocabulary.
//   odd:  the rest is text for the real Qwen3 tokenizer: encode (invalid UTF-8 must throw), decode,
//         and for ASCII text the round trip decode(encode(text)) == text (Qwen3's NFC normalizer
//         leaves ASCII alone), a wrong round trip being a finding like a crash.
// Any input must work or throw ditto::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz_real_files.h"
#include "tokenizer/tokenizer.h"

namespace {

void exercise(const ditto::Tokenizer& t, std::string_view text) {
  for (const bool special : {true, false}) {
    const std::vector<int32_t> ids = t.encode(text, special);
    (void)t.decode(ids, /*skip_special_tokens=*/false);
    (void)t.decode(ids, /*skip_special_tokens=*/true, /*clean_up_tokenization_spaces=*/true);
  }
}

void load_json(std::string_view json) {
  const std::unique_ptr<ditto::Tokenizer> t = ditto::Tokenizer::from_json(std::string(json), "fuzz tokenizer.json");
  for (const char* text : {"Hello, world!  It's 2026.\n\tdone", "ünïcødé 漢字 🙂", "<|endoftext|>a<s>b", ""})
    exercise(*t, text);
  std::vector<int32_t> every;
  for (int32_t id = 0; id < t->vocab_size() && id < 4096; ++id) {
    (void)t->id_to_token(id);
    every.push_back(id);
  }
  (void)t->decode(every);
}

void encode_real(std::string_view text) {
  const ditto::Tokenizer& t = ditto::fuzz::qwen3_tokenizer();
  exercise(t, text);
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii && t.decode(t.encode(text, /*add_special_tokens=*/false)) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)ditto::fuzz::qwen3_tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0)
      load_json(rest);
    else
      encode_real(rest);
  } catch (const ditto::Error&) {
  }
  return 0;
}
