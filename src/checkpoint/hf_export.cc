#include "checkpoint/hf_export.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "architecture/model_tensors.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/gguf_types.h"
#include "checkpoint/safetensors_writer.h"
#include "core/error.h"
#include "kernels/quant.h"
#include "tokenizer/gguf_vocab.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kFlushBytes = size_t{1} << 22;  // payload bytes buffered before an append

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw_error(ErrorCode::kResourceExhausted, path.string() + ": write failed");
}

// One GGUF row as float32 (`out[cols]`), dequantized or converted exactly.
void gguf_row_f32(const GgufWeight& w, int64_t gguf_row, float* out) {
  const uint8_t* row = w.data + static_cast<size_t>(gguf_row) * w.row_bytes;
  const QuantType quant = quant_type_of(w.type);
  if (quant != QuantType::kNone) {
    dequantize_row_f32(quant, row, w.cols, out);
    return;
  }
  const DType dtype = dtype_of(w.type);
  const size_t es = dtype_size(dtype);
  for (int64_t i = 0; i < w.cols; ++i) {
    uint8_t bytes[4];
    std::memcpy(bytes, row + static_cast<size_t>(i) * es, es);  // mmap data need not be aligned
    out[i] = load_as_f32(bytes, dtype, 0);
  }
}

// Hugging Face row -> the GGUF row it is stored at (the inverse of llama_permuted_row); identity
// when the tensor is not permuted.
std::vector<int64_t> gguf_rows_of(const GgufWeight& w) {
  std::vector<int64_t> rows(static_cast<size_t>(w.rows));
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t hf = w.permute_head_dim > 0 ? llama_permuted_row(r, w.permute_head_dim) : r;
    rows[static_cast<size_t>(hf)] = r;
  }
  return rows;
}

// Streams t's values, Hugging Face row by row, as `dtype` bytes into `writer`.
void write_tensor(const GgufFile& g, const ModelConfig& c, const TensorDesc& t, DType dtype, SafetensorsWriter& writer,
                  std::vector<uint8_t>& buffer) {
  const GgufWeight w = gguf_weight(g, c, t);
  std::vector<float> values(static_cast<size_t>(w.cols));
  auto flush = [&] {
    writer.append(buffer.data(), buffer.size());
    buffer.clear();
  };
  auto put = [&](const float* v, int64_t n) {
    const size_t es = dtype_size(dtype);
    const size_t at = buffer.size();
    buffer.resize(at + static_cast<size_t>(n) * es);
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* out = buffer.data() + at + static_cast<size_t>(i) * es;
      if (dtype == DType::kF32) {
        std::memcpy(out, &v[i], 4);
      } else {
        const uint16_t h = f32_to_bf16(v[i]);
        std::memcpy(out, &h, 2);
      }
    }
    if (buffer.size() >= kFlushBytes) flush();
  };
  if (w.rows == 1 && t.shape.size() == 1) {  // a vector: a permuted one (q/k bias) by element
    std::vector<float> stored(values.size());
    gguf_row_f32(w, 0, stored.data());
    for (int64_t i = 0; i < w.cols; ++i) {
      const int64_t to = w.permute_head_dim > 0 ? llama_permuted_row(i, w.permute_head_dim) : i;
      // Gemma's (1 + w): llama.cpp stores the sum; Hugging Face keeps w (ditto's loader adds the 1 back).
      const float v = stored[static_cast<size_t>(i)];
      values[static_cast<size_t>(to)] = t.unit_offset ? v - 1.0f : v;
    }
    put(values.data(), w.cols);
    return;
  }
  const std::vector<int64_t> rows = gguf_rows_of(w);
  for (int64_t r = 0; r < w.rows; ++r) {
    gguf_row_f32(w, rows[static_cast<size_t>(r)], values.data());
    put(values.data(), w.cols);
  }
}

}  // namespace

DType parse_hf_export_dtype(const std::string& name) {
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float32") return DType::kF32;
  throw_invalid_argument("--dtype '" + name + "': export-hf writes bfloat16 or float32");
}

HfExportSummary export_hf(const std::string& gguf_path, const std::string& out_dir, DType dtype) {
  if (dtype == DType::kF16)
    throw_invalid_argument(
        "export-hf: dtype float16 is not written (bfloat16 or float32: dequantized values may "
        "exceed float16's range)");
  const std::unique_ptr<GgufFile> g = GgufFile::open(gguf_path);
  const ModelConfig config = gguf_model_config(*g);
  if (g->find_tensor("rope_freqs.weight") != nullptr)
    throw_invalid_argument(gguf_path +
                           ": tensor 'rope_freqs.weight' (llama3 RoPE scaling) cannot be exported: the file keeps "
                           "only the per-frequency divisors, not the rope_scaling keys config.json needs");
  validate_gguf_weights(*g, config);
  const HfTokenizerFiles tokenizer = hf_tokenizer_from_gguf(gguf_vocab(*g), gguf_path);

  const fs::path dir(out_dir);
  if (fs::exists(dir) && !fs::is_directory(dir))
    throw_invalid_argument("--out " + out_dir + " is a file; export-hf writes a model directory");
  json config_json = gguf_config_json(*g);
  config_json["torch_dtype"] = dtype == DType::kF32 ? "float32" : "bfloat16";
  json generation = json::object();
  if (config_json.contains("bos_token_id")) generation["bos_token_id"] = config_json["bos_token_id"];
  json eos = json::array();
  for (int32_t id : tokenizer.eos_token_ids)
    if (id < config.vocab_size) eos.push_back(id);
  generation["eos_token_id"] = eos;

  HfExportSummary summary;
  summary.architecture = config.architecture;
  try {
    fs::create_directories(dir);
    fs::remove(dir / "config.json");
    fs::remove(dir / "model.safetensors.index.json");  // a stale index would name other shards
    write_text(dir / "tokenizer.json", tokenizer.tokenizer_json);
    write_text(dir / "tokenizer_config.json", tokenizer.tokenizer_config.dump(2) + "\n");
    write_text(dir / "generation_config.json", generation.dump(2) + "\n");

    std::vector<SafetensorsEntry> entries;
    std::map<std::string, TensorDesc> descs;
    for_each_tensor(config, [&](const TensorDesc& t) {
      entries.push_back({t.name, dtype, t.shape});
      descs.emplace(t.name, t);
      summary.num_parameters += entries.back().nbytes() / dtype_size(dtype);
    });
    summary.num_tensors = entries.size();
    SafetensorsWriter writer((dir / "model.safetensors").string(), std::move(entries));
    std::vector<uint8_t> buffer;
    for (const SafetensorsEntry& e : writer.layout()) write_tensor(*g, config, descs.at(e.name), dtype, writer, buffer);
    writer.append(buffer.data(), buffer.size());
    writer.finish();
    summary.safetensors_bytes = writer.file_size();
    write_text(dir / "config.json", config_json.dump(2) + "\n");
  } catch (const fs::filesystem_error& e) {
    throw_invalid_argument("export-hf: cannot write " + out_dir + ": " + e.code().message() + " (" +
                           e.path1().string() + ")");
  }
  return summary;
}

}  // namespace ditto
