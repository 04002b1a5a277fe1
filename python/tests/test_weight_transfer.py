"""vLLM's weight-transfer API on ditto's LLM and AsyncLLM (issue 35, docs/RL.md): an update of every
tensor (in-process numpy arrays, or the shared file) gives the outputs of an LLM loaded with the new
weights, bit for bit; a refused update names the tensor and leaves the old weights; outputs carry
the version; AsyncLLM's pause_generation("keep") with a request in flight, an update, then
resume_generation loses no token and says which came from which version; sleep / wake_up."""
import asyncio
import json
import pathlib
import struct

import numpy as np
import pytest

import ditto
from ditto import LLM, SamplingParams
from conftest import make_model

PROMPTS = ["The capital of France is", "def fib(n):", "Once upon a time"]


def params():
    return SamplingParams(temperature=0.9, n=2, max_tokens=12, seed=5, logprobs=0, ignore_eos=True)


def bits(outputs):
    return [[(list(c.token_ids), [next(iter(p.values())).logprob for p in c.logprobs]) for c in o.outputs]
            for o in outputs]


def read_checkpoint(model_dir):
    """[(name, numpy array of the raw values, dtype name)] of a safetensors directory."""
    out = []
    for path in sorted(model_dir.glob("*.safetensors")):
        data = path.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        for name, info in json.loads(data[8:8 + n]).items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            np_dtype, dtype = {"BF16": (np.uint16, "bfloat16"), "F32": (np.float32, "float32")}[info["dtype"]]
            out.append((name, np.frombuffer(data[8 + n + begin:8 + n + end], np_dtype).reshape(info["shape"]), dtype))
    return sorted(out, key=lambda t: t[0])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("rl")
    return make_model(root / "old", layers=1, seed=0), make_model(root / "new", layers=1, seed=1)


@pytest.fixture(scope="module")
def want(models):
    return [bits(LLM(model=str(m), kv_cache_memory="256MiB").generate(PROMPTS, params(), use_tqdm=False))
            for m in models]


def test_update_every_tensor_equals_an_llm_on_the_new_weights(models, want):
    llm = LLM(model=str(models[0]), kv_cache_memory="256MiB", weight_transfer_config={"backend": "shm"})
    outs = llm.generate(PROMPTS, params(), use_tqdm=False)
    assert bits(outs) == want[0] and {o.weight_version for o in outs} == {"0"}
    fingerprint = llm.system_fingerprint
    assert llm.update_weights_from_tensors(read_checkpoint(models[1]), weight_version="step-1") == "step-1"
    outs = llm.generate(PROMPTS, params(), use_tqdm=False)
    assert bits(outs) == want[1]
    assert {o.weight_version for o in outs} == {"step-1"}
    assert all(c.weight_versions == [(0, "step-1")] for o in outs for c in o.outputs)
    assert llm.system_fingerprint != fingerprint and llm.weight_version == "step-1"


def test_shared_file_transport(models, want, tmp_path):
    llm = LLM(model=str(models[0]), kv_cache_memory="256MiB")
    region = tmp_path / "weights"
    info = {"names": [], "dtype_names": [], "shapes": [], "offsets": []}
    with open(region, "wb") as f:
        offset = 0
        for name, array, dtype in read_checkpoint(models[1]):
            offset = (offset + 63) // 64 * 64
            f.seek(offset)
            f.write(array.tobytes())
            for key, value in zip(info, (name, dtype, list(array.shape), offset)):
                info[key].append(value)
            offset += array.nbytes
    llm.init_weight_transfer_engine({"init_info": {"path": str(region)}})
    llm.start_weight_update()
    half = len(info["names"]) // 2
    llm.update_weights({"update_info": {k: v[:half] for k, v in info.items()}})
    llm.update_weights({"update_info": {k: v[half:] for k, v in info.items()}})
    assert llm.finish_weight_update() == "1"
    assert bits(llm.generate(PROMPTS, params(), use_tqdm=False)) == want[1]


def test_refused_update_names_the_tensor_and_keeps_the_old_weights(models, want):
    llm = LLM(model=str(models[0]), kv_cache_memory="256MiB")
    tensors = read_checkpoint(models[1])
    name, array, dtype = tensors[3]
    for bad, says in (((name + "x", array, dtype), "is not a tensor"),
                      ((name, array[:1], dtype), "shape"),
                      ((name, array, "int8"), "int8")):
        llm.start_weight_update()
        with pytest.raises(ValueError, match=says):
            llm.update_weights(named_tensors=tensors[:3] + [bad])
        with pytest.raises(ValueError, match="no weight update in progress"):
            llm.finish_weight_update()
        assert bits(llm.generate(PROMPTS, params(), use_tqdm=False)) == want[0]
    llm.start_weight_update()
    with pytest.raises(ValueError, match="a weight update is in progress"):
        llm.generate(PROMPTS, params(), use_tqdm=False)
    llm.finish_weight_update("nothing")
    with pytest.raises(ValueError, match="'nccl' is not supported"):
        LLM(model=str(models[0]), weight_transfer_config={"backend": "nccl"})


def test_sleep_and_wake_up(models, want):
    llm = LLM(model=str(models[0]), kv_cache_memory="256MiB", enable_sleep_mode=True)
    llm.sleep(level=1)
    assert llm.is_sleeping()
    with pytest.raises(ValueError, match="sleeping"):
        llm.generate(PROMPTS, params(), use_tqdm=False)
    llm.wake_up()
    assert bits(llm.generate(PROMPTS, params(), use_tqdm=False)) == want[0]
    llm.sleep(level=2)
    with pytest.raises(ValueError, match="every tensor"):
        llm.wake_up()
    llm.update_weights_from_tensors(read_checkpoint(models[1]), "woke")
    llm.wake_up()
    assert bits(llm.generate(PROMPTS, params(), use_tqdm=False)) == want[1]


def test_async_pause_keep_update_resume_loses_nothing(models):
    sp = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True, logprobs=0)
    old = LLM(model=str(models[0]), kv_cache_memory="256MiB").generate([PROMPTS[2]], sp,
                                                                       use_tqdm=False)[0].outputs[0].token_ids
    tensors = read_checkpoint(models[1])

    async def run():
        engine = ditto.AsyncLLM(model=str(models[0]), kv_cache_memory="256MiB")
        seen = []
        final = None

        async def consume():
            nonlocal final
            async for out in engine.generate(PROMPTS[2], sp, request_id="kept"):
                seen.append(len(out.outputs[0].token_ids))
                final = out

        task = asyncio.create_task(consume())
        while not seen or seen[-1] < 8:
            await asyncio.sleep(0.01)
        await engine.pause_generation(mode="keep")
        assert await engine.is_paused()
        await engine.start_weight_update()
        await engine.update_weights(named_tensors=tensors)
        assert await engine.finish_weight_update("kept-1") == "kept-1"
        await engine.resume_generation()
        await task
        engine.shutdown()
        return final

    final = asyncio.run(run())
    c = final.outputs[0]
    assert len(c.token_ids) == 64 and c.finish_reason == "length"
    assert [v for _, v in c.weight_versions] == ["0", "kept-1"]
    switch = c.weight_versions[1][0]
    assert 8 <= switch < 64
    assert c.token_ids[:switch] == old[:switch]
    assert final.weight_version == "kept-1"


TP_SCRIPT = """
import json, struct, sys
import numpy as np
from ditto import LLM, SamplingParams
sys.path.insert(0, sys.argv[4])
from test_weight_transfer import read_checkpoint, PROMPTS, params, bits
import pathlib
llm = LLM(model=sys.argv[1], tensor_parallel_size=int(sys.argv[2]), threads=1, kv_cache_memory="256MiB")
version = llm.update_weights_from_tensors(read_checkpoint(pathlib.Path(sys.argv[3])), weight_version="tp-1")
outs = llm.generate(PROMPTS, params(), use_tqdm=False)
if llm.is_driver:
    with open(sys.argv[5], "w") as f:
        json.dump({"version": version, "bits": bits(outs), "versions": [o.weight_version for o in outs]}, f)
"""


def test_tensor_parallel_2_update_equals_one_process_on_the_new_weights(models, want, tmp_path):
    import os, shutil, subprocess, sys
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun missing: scripts/install-deps.sh installs Open MPI")
    script = tmp_path / "tp.py"
    script.write_text(TP_SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = tmp_path / "tp.json"
    got = subprocess.run([mpirun, "-np", "2", sys.executable, script, str(models[0]), "2", str(models[1]),
                          str(pathlib.Path(__file__).parent), out], env=env, capture_output=True, text=True,
                         timeout=600)
    assert got.returncode == 0, got.stdout + got.stderr
    result = json.loads(out.read_text())
    assert result["version"] == "tp-1" and set(result["versions"]) == {"tp-1"}
    assert [[tuple(c) for c in o] for o in result["bits"]] == [[tuple(c) for c in o] for o in want[1]]
