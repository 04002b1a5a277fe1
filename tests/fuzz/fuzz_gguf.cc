// The GGUF reader on arbitrary bytes, as `ditto serve model.gguf` reads a file: magic, version,
// metadata key/value pairs (strings, arrays, nested types), tensor infos (names, dimensions,
// types, offsets), alignment; the model configuration derived from the metadata and every weight's
// shape and type checked against it; then the vocabulary keys turned into a tokenizer (llama.cpp's
// pre-tokenizer table, merges, token types, special ids) and the chat template, and a text encoded.
// Any input must load or throw ditto::Error.
#include <cstddef>
#include <cstdint>

#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "core/error.h"
#include "fuzz_input_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ditto::fuzz::InputFile file;
  const std::string path = file.write(data, size);
  std::unique_ptr<ditto::GgufFile> g;
  try {
    g = ditto::GgufFile::open(path);
  } catch (const ditto::Error&) {
    return 0;
  }
  try {
    const ditto::ModelConfig c = ditto::gguf_model_config(*g);
    ditto::validate_gguf_weights(*g, c);
  } catch (const ditto::Error&) {
  }
  try {
    const ditto::HfTokenizerFiles files = ditto::hf_tokenizer_from_gguf(ditto::gguf_vocab(*g), path);
    const std::unique_ptr<ditto::Tokenizer> t =
        ditto::Tokenizer::from_json(files.tokenizer_json, path, files.tokenizer_config);
    (void)t->decode(t->encode("ab a b! <|im_start|>\n"));
    if (files.tokenizer_config.contains("chat_template")) {
      const ditto::ChatTemplate ct = ditto::ChatTemplate::from_config(files.tokenizer_config, path);
      (void)ct.render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "ab"}])"), nullptr, true);
    }
  } catch (const ditto::Error&) {
  }
  return 0;
}
