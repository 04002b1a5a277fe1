"""The engine releases the GIL while it works, Ctrl-C aborts a batch cleanly, and repeated
generate() calls do not grow memory."""
import _thread
import signal
import threading
import time

import pytest

from ditto import SamplingParams


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_the_gil_is_released_during_generate(llm):
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.perf_counter()
    llm.generate(["Tell me a long story"] * 4, SamplingParams(max_tokens=48, ignore_eos=True, seed=1), use_tqdm=False)
    elapsed = time.perf_counter() - start
    stop.set()
    t.join()
    # A thread sleeping 1 ms per tick gets well over a tick per 10 ms of a generate that keeps the
    # GIL released (it would get almost none if the engine held it).
    assert elapsed > 0.2 and ticks > elapsed * 100, (ticks, elapsed)


def test_ctrl_c_aborts_the_batch_and_the_llm_stays_usable(llm):
    # Ctrl-C every 0.5 s until generate returns, as a user presses it again when the first seems
    # lost (a SIGINT that lands while Python runs a finalizer is swallowed by Python itself); the
    # batch must end within a few presses, well before its 8 x 4000 tokens. The handler raises
    # KeyboardInterrupt as Python's default one does, until the test has seen it.
    armed = True

    def on_sigint(signum, frame):
        if armed:
            raise KeyboardInterrupt

    stop = threading.Event()
    presses = []

    def press():
        while not stop.wait(0.5):
            presses.append(time.perf_counter())
            _thread.interrupt_main()

    default_handler = signal.signal(signal.SIGINT, on_sigint)
    presser = threading.Thread(target=press, daemon=True)
    start = time.perf_counter()
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            outs = llm.generate(["Go on and on"] * 8, SamplingParams(max_tokens=4000, ignore_eos=True, seed=3),
                                use_tqdm=False)
            pytest.fail(f"generate returned after {time.perf_counter() - start:.1f} s and {len(presses)} Ctrl-C, "
                        f"{sum(len(o.outputs[0].token_ids) for o in outs)} tokens")
        armed = False
    finally:
        armed = False
        stop.set()
        presser.join()
        signal.signal(signal.SIGINT, default_handler)
    elapsed = time.perf_counter() - start
    assert elapsed < 30 and len(presses) <= 3, (elapsed, len(presses))
    out = llm.generate("Still here?", SamplingParams(max_tokens=3, ignore_eos=True), use_tqdm=False)[0]
    assert len(out.outputs[0].token_ids) == 3


def test_no_memory_growth_over_1000_generate_calls(llm):
    params = SamplingParams(temperature=0.9, max_tokens=2, seed=0, logprobs=1)
    for _ in range(100):  # warm: allocator pools, caches
        llm.generate("Hello", params, use_tqdm=False)
    before = rss_bytes()
    for i in range(1000):
        llm.generate(["Hello", f"request {i}"], params, use_tqdm=False)
    grown = rss_bytes() - before
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1000 generate calls"
