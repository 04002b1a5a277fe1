"""LLM(enable_return_routed_experts=True) (vLLM's routing replay): every finished CompletionOutput
of a MoE model carries routed_experts, a numpy array [prompt + output tokens - 1, MoE layers,
num_experts_per_tok] of the experts the routers chose, in the router's order; the same ints alone
or in a batch, from the prefix cache, under speculative decoding and split over two MPI ranks. A
dense model refuses the flag by name."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest


@pytest.fixture(scope="module")
def moe_dir(tmp_path_factory) -> str:
    """A 2-layer qwen3-30b-a3b cut to 16 experts (it keeps top-8 routing)."""
    out = tmp_path_factory.mktemp("moe") / "qwen3-30b-a3b-2l"
    subprocess.run(["ditto", "make-test-model", "--preset", "qwen3-30b-a3b", "--num-hidden-layers", "2",
                    "--num-experts", "16", "--seed", "4", "--out", str(out)], check=True, capture_output=True,
                   timeout=900)
    return str(out)


PROMPTS = [{"prompt_token_ids": [785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13] * 3},
           {"prompt_token_ids": [9707, 11, 1879, 0, 42]},
           "The quick brown fox"]


def _generate(llm, prompts, **params):
    from ditto import SamplingParams
    sp = SamplingParams(temperature=0.8, seed=3, max_tokens=9, ignore_eos=True, **params)
    return llm.generate(prompts, sp, use_tqdm=False)


def test_shape_dtype_and_invariance(moe_dir):
    import ditto
    llm = ditto.LLM(model=moe_dir, kv_cache_memory="256MiB", enable_return_routed_experts=True)
    together = _generate(llm, PROMPTS, n=2)
    for out in together:
        for c in out.outputs:
            r = c.routed_experts
            assert isinstance(r, np.ndarray) and r.dtype == np.uint8
            assert r.shape == (len(out.prompt_token_ids) + len(c.token_ids) - 1, 2, 8)
            assert r.max() < 16 and all(len(set(row)) == 8 for row in r.reshape(-1, 8))
    for i, prompt in enumerate(PROMPTS):  # alone, then again from the prefix cache
        for attempt in range(2):
            alone = _generate(llm, [prompt], n=2)[0]
            for a, b in zip(alone.outputs, together[i].outputs):
                assert a.token_ids == b.token_ids
                assert np.array_equal(a.routed_experts, b.routed_experts), (i, attempt)
    assert _generate(llm, PROMPTS[:1])[0].num_cached_tokens > 0
    spec = ditto.LLM(model=moe_dir, kv_cache_memory="256MiB", enable_return_routed_experts=True,
                     speculative_config={"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})
    for a, b in zip(_generate(spec, PROMPTS, n=2), together):
        for x, y in zip(a.outputs, b.outputs):
            assert x.token_ids == y.token_ids and np.array_equal(x.routed_experts, y.routed_experts)


def test_off_by_default_and_refused_on_a_dense_model(moe_dir, model_dir):
    import ditto
    plain = ditto.LLM(model=moe_dir, kv_cache_memory="256MiB")
    assert _generate(plain, PROMPTS[2:])[0].outputs[0].routed_experts is None
    with pytest.raises(ValueError, match="enable_return_routed_experts.*no MoE layers"):
        ditto.LLM(model=model_dir, kv_cache_memory="256MiB", enable_return_routed_experts=True)


MPIRUN = shutil.which("mpirun")
SCRIPT = textwrap.dedent("""
    import json, sys
    from ditto import LLM, SamplingParams
    llm = LLM(model=sys.argv[1], tensor_parallel_size=int(sys.argv[2]), threads=1, kv_cache_memory="256MiB",
              enable_return_routed_experts=True)
    outs = llm.generate(["The weather today is", "1, 2, 3,"], SamplingParams(temperature=0, max_tokens=6),
                        use_tqdm=False)
    if llm.is_driver:
        with open(sys.argv[3], "w") as f:
            json.dump([c.routed_experts.tolist() for o in outs for c in o.outputs], f)
""")


@pytest.mark.skipif(MPIRUN is None, reason="mpirun missing: scripts/install-deps.sh installs Open MPI")
def test_tensor_parallel_ranks_route_as_one_process(moe_dir, tmp_path):
    script = tmp_path / "tp.py"
    script.write_text(SCRIPT)
    subprocess.run([sys.executable, script, moe_dir, "1", tmp_path / "one.json"], check=True, timeout=600)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    got = subprocess.run([MPIRUN, "-np", "2", sys.executable, script, moe_dir, "2", tmp_path / "tp.json"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout + got.stderr
    one = json.loads((tmp_path / "one.json").read_text())
    assert len(one) == 2 and all(len(r) > 4 for r in one)
    assert json.loads((tmp_path / "tp.json").read_text()) == one
