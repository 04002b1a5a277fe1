"""The batch-invariance switch vLLM users set: VLLM_BATCH_INVARIANT (and ditto's own name,
DITTO_BATCH_INVARIANT). ditto is always batch-invariant: its invariant kernels are its fast kernels,
so there is no faster non-invariant mode to switch to. "1" (or unset) is what ditto does anyway;
"0" prints one line saying so, once per process."""
import os
import sys

_NAMES = ("DITTO_BATCH_INVARIANT", "VLLM_BATCH_INVARIANT")
_warned = False


def batch_invariant_mode() -> bool:
    """Returns True (ditto is always batch-invariant). Prints one line to stderr, once, when
    VLLM_BATCH_INVARIANT or DITTO_BATCH_INVARIANT asks for the mode off ("0")."""
    global _warned
    for name in _NAMES:
        value = os.environ.get(name)
        if value is not None and value.strip() == "0" and not _warned:
            _warned = True
            print(f"ditto: {name}=0 ignored: ditto has no non-invariant mode, its batch-invariant kernels "
                  "are its fast ones (README, Benchmarks: the comparison with llama.cpp)", file=sys.stderr)
    return True
