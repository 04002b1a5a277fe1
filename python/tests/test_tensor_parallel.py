"""LLM(tensor_parallel_size=N) under `mpirun -np N python script.py` (vLLM's external-launcher
pattern): every rank runs the same script, rank 0 returns the results, which are the bits of one
process; the other ranks' generate() returns [] once rank 0's script has ended."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun missing: scripts/install-deps.sh installs Open MPI")

SCRIPT = textwrap.dedent("""
    import json, sys
    from ditto import LLM, SamplingParams
    llm = LLM(model=sys.argv[1], tensor_parallel_size=int(sys.argv[2]), threads=1, kv_cache_memory="256MiB")
    params = [SamplingParams(temperature=0.8, seed=5, n=3, max_tokens=10, logprobs=2),
              SamplingParams(temperature=0, max_tokens=8, logprobs=1, prompt_logprobs=1, seed=1)]
    outs = llm.generate(["The weather today is", "1, 2, 3,"], params, use_tqdm=False)
    chat = llm.chat([{"role": "user", "content": "Hi!"}], SamplingParams(temperature=0.5, seed=9, max_tokens=6),
                    use_tqdm=False)
    def record(o):
        return {"prompt_token_ids": o.prompt_token_ids,
                "prompt_logprobs": [None if p is None else {k: v.logprob for k, v in p.items()}
                                    for p in (o.prompt_logprobs or [])],
                "outputs": [{"token_ids": list(c.token_ids), "text": c.text, "cumulative_logprob": c.cumulative_logprob,
                             "logprobs": [{k: v.logprob for k, v in lp.items()} for lp in (c.logprobs or [])]}
                            for c in o.outputs]}
    with open(sys.argv[3] + f".rank{0 if llm.is_driver else 1}", "a") as f:
        f.write(json.dumps({"driver": llm.is_driver, "results": [record(o) for o in outs + chat]}) + "\\n")
""")


def test_every_rank_runs_the_script_and_rank_0_returns_the_bits_of_one_process(model_dir, tmp_path):
    script = tmp_path / "tp.py"
    script.write_text(SCRIPT)
    one = tmp_path / "one"
    subprocess.run([sys.executable, script, model_dir, "1", one], check=True, timeout=600)
    expected = json.loads((tmp_path / "one.rank0").read_text())
    assert expected["driver"] and len(expected["results"]) == 3
    assert sum(len(c["token_ids"]) for r in expected["results"] for c in r["outputs"]) > 30
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    tp = tmp_path / "tp"
    got = subprocess.run([MPIRUN, "-np", "2", sys.executable, script, model_dir, "2", tp], env=env,
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout + got.stderr
    driver = json.loads((tmp_path / "tp.rank0").read_text())
    follower = json.loads((tmp_path / "tp.rank1").read_text())
    assert driver == expected
    assert follower == {"driver": False, "results": []}


def test_tensor_parallel_size_without_a_launcher_says_how_to_launch(model_dir):
    import ditto
    with pytest.raises(ValueError, match="mpirun -np 2"):
        ditto.LLM(model=model_dir, tensor_parallel_size=2)
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        ditto.LLM(model=model_dir, tensor_parallel_size=0)
