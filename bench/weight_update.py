"""How long an in-place weight update takes (issue 35, docs/RL.md), against loading the same weights
from disk, and what it costs in memory.

    build/venv/bin/python bench/weight_update.py [--preset qwen3-0.6b] [--layers 0] [--out result.json]

Two checkpoints of the preset (seeded random weights, `ditto make-test-model`, all layers unless
--layers) are written to a scratch directory. The run then:

1. loads the first with `LLM(model=...)` (wall seconds: reading, packing, hashing the files);
2. writes every tensor of the second into a shared-memory file under /dev/shm, as a trainer would
   (the trainer's cost, reported apart);
3. times start_weight_update + update_weights + finish_weight_update (packing in place);
4. samples the process's anonymous and shared-memory RSS every 5 ms during step 3: the engine's own
   memory (RssAnon) must not grow by more than about one layer;
5. checks a greedy generation after the update equals an LLM loaded from the second checkpoint.

Prints one JSON object; every figure comes from this run, on this machine.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time


def rss_kib():
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile", "RssShmem"):
                fields[key] = int(value.split()[0])
    return fields


def read_checkpoint(model_dir):
    """[(name, dtype name, shape, bytes)] of every tensor of a safetensors directory."""
    out = []
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            with open(os.path.join(model_dir, f), "rb") as fh:
                data = fh.read()
            (n,) = struct.unpack("<Q", data[:8])
            for name, info in json.loads(data[8:8 + n]).items():
                if name != "__metadata__":
                    begin, end = info["data_offsets"]
                    dtype = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[info["dtype"]]
                    out.append((name, dtype, info["shape"], data[8 + n + begin:8 + n + end]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen3-0.6b")
    ap.add_argument("--layers", type=int, default=0, help="0: the preset's own count")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    from ditto import LLM, SamplingParams

    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as scratch:
        dirs = []
        for seed in (1, 2):
            d = os.path.join(scratch, f"seed{seed}")
            cmd = ["ditto", "make-test-model", "--preset", args.preset, "--seed", str(seed), "--out", d]
            if args.layers:
                cmd += ["--num-hidden-layers", str(args.layers)]
            subprocess.run(cmd, check=True, capture_output=True)
            dirs.append(d)
        kwargs = {"kv_cache_memory": "256MiB"}
        if args.threads:
            kwargs["threads"] = args.threads
        t = time.perf_counter()
        llm = LLM(model=dirs[0], **kwargs)
        load_seconds = time.perf_counter() - t

        t = time.perf_counter()
        tensors = read_checkpoint(dirs[1])
        region = f"/dev/shm/ditto-bench-{os.getpid()}" if os.path.isdir("/dev/shm") else os.path.join(scratch, "shm")
        info = {"names": [], "dtype_names": [], "shapes": [], "offsets": []}
        offset = 0
        with open(region, "wb") as f:
            for name, dtype, shape, data in tensors:
                offset = (offset + 63) // 64 * 64
                f.seek(offset)
                f.write(data)
                for key, value in zip(info, (name, dtype, shape, offset)):
                    info[key].append(value)
                offset += len(data)
        update_bytes = sum(len(t[3]) for t in tensors)
        del tensors
        trainer_write_seconds = time.perf_counter() - t

        before = rss_kib()
        peak = dict(before)
        done = threading.Event()

        def sample():
            while not done.is_set():
                for k, v in rss_kib().items():
                    peak[k] = max(peak[k], v)
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            t = time.perf_counter()
            llm.init_weight_transfer_engine({"init_info": {"path": region}})
            llm.start_weight_update()
            llm.update_weights({"update_info": info})
            llm.finish_weight_update("bench")
            update_seconds = time.perf_counter() - t
        finally:
            done.set()
            sampler.join()
            os.unlink(region)

        sp = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
        prompts = ["The capital of France is", "def fib(n):"]
        got = [o.outputs[0].token_ids for o in llm.generate(prompts, sp, use_tqdm=False)]
        del llm
        want = [o.outputs[0].token_ids for o in LLM(model=dirs[1], **kwargs).generate(prompts, sp, use_tqdm=False)]

    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    result = {
        "cpu": cpu, "preset": args.preset, "layers": args.layers or "all",
        "update_bytes": update_bytes,
        "load_seconds": round(load_seconds, 3),
        "update_seconds": round(update_seconds, 3),
        "update_over_load": round(update_seconds / load_seconds, 3),
        "update_gb_per_s": round(update_bytes / update_seconds / 1e9, 3),
        "trainer_write_seconds": round(trainer_write_seconds, 3),
        "rss_anon_growth_mib": round((peak["RssAnon"] - before["RssAnon"]) / 1024, 1),
        "rss_shmem_peak_mib": round((peak["RssShmem"] - before["RssShmem"]) / 1024, 1),
        "generation_equals_fresh_load": got == want,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main())
