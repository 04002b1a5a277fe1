import os
os.environ["VLLM_BATCH_INVARIANT"] = "1"
from ditto import LLM, SamplingParams
prompts = ["The future of AI is", "Machine learning enables", "Deep learning models can"]
sampling_params = SamplingParams(temperature=0.7, max_tokens=100, seed=42)
llm = LLM(model="Qwen/Qwen3-8B", tensor_parallel_size=1)
outputs = llm.generate(prompts, sampling_params)
for output in outputs:
    print(f"Prompt: {output.prompt!r}")
    print(f"Generated: {output.outputs[0].text!r}\n")
