"""Time to first answer: how long a server takes from its launch to the first answered request.

    python3 bench/startup.py --ditto "build/tools/ditto serve MODEL_DIR --port 0 --threads 2" \
        --llama-server "LLAMA_BIN/llama-server -m MODEL.gguf --port 0 -t 2" [--repeats 3] [--json]

Each server is started REPEATS times, alternating (ditto, llama-server, ditto, ...), so a change in
the machine's load reaches both. One start: the command is spawned; its output is read until it
prints 'listening on http://HOST:PORT' (both servers print this); then POST /v1/completions
{"prompt": "Hello", "max_tokens": 1, "temperature": 0} is sent every 50 ms until one answers 200.
The time from spawn to that answer is the start's figure: loading the weights, any measurement the
engine makes at start, and the first forward pass. The server is then stopped (SIGTERM).

Prints a table (or --json: one object) with each engine's times, their medians and ditto ÷
llama-server of the medians (lower is better for ditto). Errors: a server that exits, or does not
answer within --timeout seconds, stops the run with its last output lines (exit 1).
"""

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

LISTENING = re.compile(r"listening on http://[^\s/]+:(\d+)")


def one_start(command, timeout):
    """Seconds from spawn to the first answered completion."""
    t0 = time.monotonic()
    proc = subprocess.Popen(shlex.split(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    lines, port = [], []

    def read():
        for line in proc.stdout:
            lines.append(line)
            m = LISTENING.search(line)
            if m and not port:
                port.append(int(m.group(1)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        body = json.dumps({"prompt": "Hello", "max_tokens": 1, "temperature": 0}).encode()
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"exited with {proc.returncode}: {command}\n" + "".join(lines[-10:]))
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"no answer within {timeout} s: {command}\n" + "".join(lines[-10:]))
            if port:
                req = urllib.request.Request(f"http://127.0.0.1:{port[0]}/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=timeout) as r:
                        if r.status == 200:
                            json.loads(r.read())
                            return time.monotonic() - t0
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
            time.sleep(0.05)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ditto", required=True, help="ditto serve command line (with --port 0)")
    ap.add_argument("--llama-server", required=True, help="llama-server command line (with --port 0)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    times = {"ditto": [], "llama_server": []}
    try:
        for _ in range(a.repeats):
            times["ditto"].append(one_start(a.ditto, a.timeout))
            times["llama_server"].append(one_start(a.llama_server, a.timeout))
    except RuntimeError as e:
        print(f"error: startup.py: {e}", file=sys.stderr)
        sys.exit(1)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "ditto_seconds": [round(t, 3) for t in times["ditto"]],
        "llama_server_seconds": [round(t, 3) for t in times["llama_server"]],
        "ditto_median_seconds": round(med["ditto"], 3),
        "llama_server_median_seconds": round(med["llama_server"], 3),
        "ratio": round(med["ditto"] / med["llama_server"], 3),
    }
    if a.json:
        print(json.dumps(result))
        return
    print(f"{'':14}{'median s':>10}  starts")
    for k in ("ditto", "llama_server"):
        print(f"{k:14}{med[k]:10.2f}  " + " ".join(f"{t:.2f}" for t in times[k]))
    print(f"ditto / llama-server: {result['ratio']:.3f}")


if __name__ == "__main__":
    main()
