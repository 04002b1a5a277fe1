"""The same requests through the Python package's LLM.generate and through `ditto generate
--prompts` (the C++ CLI), in one run: Python's generated tokens per second ÷ the CLI's, over the
generation alone. Python: the time of the generate() call. CLI: the wall time of the command less
its fixed cost (start, load, exit), measured by the same command on an empty request file. The
runs alternate --repeat times and the best of each is compared (a shared machine's noise only
slows a run down); the token ids of both must be the same.

    build/venv/bin/python bench/python_vs_cli.py MODEL_DIR [--num-requests 64] [--prompt-words 48]
                                                 [--output-tokens 64] [--repeat 3] [--json]

Needs the package installed in the running Python (make python-package) and its `ditto` on PATH
(or --ditto PATH). Prints the ratio; the target is >= 0.98 (issue 13).
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

WORDS = ("the of and a to in is you that it he was for on are as with his they at be this have from or one had "
         "by word but not what all were we when your can said there use an each which she do how their if will up "
         "other about out many then them these so some her would make like him into time has look two more").split()

PYTHON_RUN = r"""
import json, sys, time
from ditto import LLM, SamplingParams
reqs = [json.loads(l) for l in open(sys.argv[2])]
llm = LLM(model=sys.argv[1])
params = [SamplingParams(temperature=r["temperature"], max_tokens=r["max_tokens"], seed=r["seed"], ignore_eos=True)
          for r in reqs]
t0 = time.perf_counter()
outs = llm.generate([r["prompt"] for r in reqs], params, use_tqdm=False)
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "tokens": sum(len(o.outputs[0].token_ids) for o in outs),
                  "token_ids": [o.outputs[0].token_ids for o in outs]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=48)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ditto", default=shutil.which("ditto"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.ditto:
        sys.exit("python_vs_cli: `ditto` not on PATH (install the package, or pass --ditto)")
    rng = random.Random(0)
    reqs = [{"prompt": " ".join(rng.choice(WORDS) for _ in range(a.prompt_words)), "max_tokens": a.output_tokens,
             "temperature": 0.8, "seed": i, "ignore_eos": True} for i in range(a.num_requests)]
    with tempfile.TemporaryDirectory() as tmp:
        path, empty = os.path.join(tmp, "requests.jsonl"), os.path.join(tmp, "empty.jsonl")
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in reqs)
        open(empty, "w").close()

        def cli(requests: str) -> tuple[float, list]:
            t0 = time.perf_counter()
            out = subprocess.run([a.ditto, "generate", "--model", a.model, "--prompts", requests], check=True,
                                 capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            return seconds, [json.loads(l)["outputs"][0]["token_ids"] for l in out.stdout.splitlines()]

        py_runs, cli_runs, fixed, py_ids, cli_ids = [], [], [], None, None
        for _ in range(a.repeat):
            out = subprocess.run([sys.executable, "-c", PYTHON_RUN, a.model, path], check=True, capture_output=True,
                                 text=True)
            r = json.loads(out.stdout)
            py_runs.append(r["tokens"] / r["seconds"])
            py_ids = r["token_ids"]
            fixed.append(cli(empty)[0])
            seconds, cli_ids = cli(path)
            cli_runs.append((seconds, sum(map(len, cli_ids))))
        cli_runs = [tokens / (seconds - min(fixed)) for seconds, tokens in cli_runs]
    same = py_ids == cli_ids
    result = {"model": a.model, "num_requests": a.num_requests, "output_tokens": a.output_tokens,
              "python_tokens_per_s": max(py_runs), "cli_tokens_per_s": max(cli_runs),
              "python_over_cli": max(py_runs) / max(cli_runs), "python_runs": py_runs, "cli_runs": cli_runs,
              "cli_fixed_seconds": min(fixed), "same_tokens": same}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"LLM.generate         {result['python_tokens_per_s']:10.2f} generated tokens/s (best of {a.repeat})")
        print(f"ditto generate       {result['cli_tokens_per_s']:10.2f} generated tokens/s (less its fixed "
              f"{result['cli_fixed_seconds']:.2f} s: start, load, exit)")
        print(f"python / cli         {result['python_over_cli']:10.3f}   (target >= 0.98); same tokens: {same}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
