"""bench/plot.py on a small made-up JSON of each kind: an SVG comes out, it is well-formed XML,
states the ratio and the CPU, and is the same bytes when drawn twice."""

import json
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

PLOT = pathlib.Path(__file__).with_name("plot.py")
CPU = "Test CPU 9000"

COMPARE = {  # bench/llama_cpp.sh compare's keys (values made up)
    "model": "/cache/models/qwen3-0.6b-28", "threads": 2, "isa": "avx2", "prompt_tokens": 512,
    "ditto_prefill_tokens_per_s": [164.5, 166.3], "llama_cpp_prefill_tokens_per_s": 110.5,
    "prefill_ratio": 1.497, "time_to_first_token_ratio": 0.668,
    "ditto_decode_tokens_per_s": [29.3, 26.7], "llama_cpp_decode_tokens_per_s": 21.2, "decode_ratio": 1.321,
}
BATCHED = {
    "model": "/cache/models/qwen3-0.6b-28", "threads": 2, "isa": "avx2", "num_seqs": 32, "prompt_tokens": 256,
    "output_tokens": 128, "ditto_generated_tokens_per_s": [41.3, 40.9], "llama_cpp_generated_tokens_per_s": 28.9,
    "generated_ratio": 1.422,
}
SERVE_RUN = {"output_tokens_per_s": 28.3, "ttft_ms_p50": 11800.0, "itl_ms_p50": 310.0, "e2e_ms_p50": 21000.0}
LLAMA_RUN = {"output_tokens_per_s": 18.5, "ttft_ms_p50": 17200.0, "itl_ms_p50": 420.0, "e2e_ms_p50": 30000.0}
SERVE = {
    "model": "/cache/models/qwen3-0.6b-28", "threads": 2, "num_clients": 16, "num_requests": 64,
    "ditto_serve": SERVE_RUN, "llama_server": LLAMA_RUN,
    "ditto_over_llama_server": {k: round(SERVE_RUN[k] / LLAMA_RUN[k], 3) for k in SERVE_RUN},
}
TP = {"tensor_parallel_size": 2, "prefill_ratio": 0.962, "decode_ratio": 0.911,
      "one_process_prefill_tokens_per_s": 160.0, "tp_prefill_tokens_per_s": 153.9,
      "one_process_decode_tokens_per_s": 28.0, "tp_decode_tokens_per_s": 25.5}
SPECULATIVE = {
    "scenario": "speculative", "model": "models/SmolLM2-135M-Instruct.Q4_1.gguf", "isa": "avx2",
    "speculative_config": '{"method":"ngram","num_speculative_tokens":4}',
    "workloads": [
        {"workload": "copying", "decode_tokens_per_s_off": 203.8, "decode_tokens_per_s_on": 238.7,
         "speedup": 1.171, "acceptance_rate": 0.61},
        {"workload": "free", "decode_tokens_per_s_off": 205.0, "decode_tokens_per_s_on": 199.1,
         "speedup": 0.971, "acceptance_rate": 0.05},
    ],
}
SUMMARY = {
    "cpu": CPU, "threads": 2, "commit": "abc1234", "model": "/cache/models/qwen3-0.6b-28",
    "rows": [
        {"row": "decode batch 1, bf16, ÷ llama.cpp", "measured": 1.321, "target": 1.15, "met": True},
        {"row": "prefill 512, ÷ llama.cpp", "measured": 1.497, "target": 2.0, "met": False},
        {"row": "serve 16 clients, TTFT p50 ÷ llama-server", "measured": 0.686, "target": 0.5, "met": False},
        {"row": "time to first answer ÷ llama-server", "measured": 0.154, "target": 1.0, "met": True},
        {"row": "TP 2 prefill ÷ one process", "measured": None, "target": 0.95, "met": None, "status": "failed"},
        {"row": "embeddings tokens/s (Q8_0), ÷ llama-server", "measured": None, "target": 1.5, "met": None,
         "status": "not run"},
    ],
    "raw": {},
}


def draw(tmp_path, data, name, *extra):
    src = tmp_path / f"{name}.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / f"{name}.svg"
    subprocess.run([sys.executable, str(PLOT), str(src), "--out", str(out), *extra], check=True)
    return out.read_bytes()


@pytest.mark.parametrize("name,data,ratios", [
    ("compare", COMPARE, ["1.50×", "1.32×"]),
    ("batched", BATCHED, ["1.42×"]),
    ("serve", SERVE, ["1.53×", "0.69×"]),
    ("tp", TP, ["0.96×", "0.91×"]),
    ("speculative", SPECULATIVE, ["1.17×", "0.97×"]),
    ("summary", SUMMARY, ["1.32", "target ≥ 1.15", "target ≤ 0.5", "failed", "1 row not run"]),
])
def test_plot(tmp_path, name, data, ratios):
    extra = ["--date", "2026-12-06"] + ([] if name == "summary" else ["--cpu", CPU])
    first = draw(tmp_path, data, name, *extra)
    ET.fromstring(first)  # well-formed
    text = first.decode("utf-8")
    for ratio in ratios + [CPU, "2026-12-06"]:
        assert ratio in text, f"{name}: '{ratio}' not on the figure"
    assert "http://" not in text.replace("http://www.w3.org/", "").replace("http://purl.org/", "").replace(
        "http://creativecommons.org/ns#", "").replace("https://matplotlib.org/", ""), "an external reference"
    assert draw(tmp_path, data, name, *extra) == first, f"{name}: not the same bytes on a second run"


def test_a_row_of_the_summary_is_drawn_from_its_own_json(tmp_path):
    summary = {**SUMMARY, "raw": {"prefill512": COMPARE, "tp2": None}}
    svg = draw(tmp_path, summary, "row", "--row", "prefill512", "--date", "2026-12-06").decode()
    assert "ditto ÷ llama.cpp = 1.50×" in svg and CPU in svg


def test_old_tensor_parallel_json_is_drawn_relative_to_one_process(tmp_path):
    old = {k: TP[k] for k in ("tensor_parallel_size", "prefill_ratio", "decode_ratio")}
    assert "relative to one process" in draw(tmp_path, old, "tp_old", "--cpu", CPU, "--date", "2026-12-06").decode()


def test_refuses_a_figure_without_its_cpu(tmp_path):
    src = tmp_path / "compare.json"
    src.write_text(json.dumps(COMPARE))
    r = subprocess.run([sys.executable, str(PLOT), str(src), "--out", str(tmp_path / "x.svg"), "--date", "2026-12-06"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--cpu" in r.stderr
    assert not (tmp_path / "x.svg").exists()
