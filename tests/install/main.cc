// The README's C++ snippet, as an outside project writes it: only <ditto/llm.h>.
#include <ditto/llm.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: app MODEL_DIR\n";
    return 2;
  }
  try {
    ditto::LLM llm({.model = argv[1], .kv_cache_memory = int64_t{64} << 20});
    ditto::SamplingParams p;
    p.temperature = 0.7f;
    p.max_tokens = 8;
    p.seed = 42;
    for (const ditto::RequestOutput& out : llm.generate({"The future of AI is"}, p))
      std::cout << out.outputs[0].token_ids.size() << " tokens: " << out.outputs[0].text << "\n";
  } catch (const ditto::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
