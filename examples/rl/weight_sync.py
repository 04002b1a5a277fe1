"""Pushing the trainer's weights into a running ditto ``LLM`` through vLLM's weight-transfer API
(``init_weight_transfer_engine`` -> ``start_weight_update`` -> ``update_weights`` (repeatable) ->
``finish_weight_update``) over ditto's shared-memory backend: the trainer writes each chunk of
tensors into a file under /dev/shm (``ditto.weight_transfer.SharedMemoryWeightWriter``) and hands
ditto its ``update_info``.

Where the ditto at hand has no weight-transfer API yet (``LLM`` without ``start_weight_update``),
``WeightSync.push`` does nothing and says so: the sampler then keeps the weights it loaded.
"""
import os
import time
from typing import Dict, Iterator, List, Tuple

from ditto.weight_transfer import SharedMemoryWeightWriter

CHUNK_BYTES = 64 << 20
"""Bytes (in the engine's dtype) per update_weights call. The chunks of one update lie side by side
in the shared-memory file (the engine reads them all at finish), so the file holds one full copy."""


def has_weight_transfer(llm) -> bool:
    """Whether this ditto LLM takes weight updates in place."""
    return hasattr(llm, "start_weight_update")


def make_llm(model_dir: str, **kwargs):
    """``LLM(model=model_dir, weight_transfer_config={"backend": "shm"}, **kwargs)``, or without
    ``weight_transfer_config`` where this ditto does not know the keyword (no weight transfer)."""
    from ditto import LLM
    try:
        return LLM(model=model_dir, weight_transfer_config={"backend": "shm"}, **kwargs)
    except TypeError as e:
        if "weight_transfer_config" not in str(e):
            raise
        return LLM(model=model_dir, **kwargs)


def _chunks(named: Dict[str, "object"], dtype_size: int) -> Iterator[List[Tuple[str, object]]]:
    chunk, size = [], 0
    for name, tensor in named.items():
        nbytes = tensor.numel() * dtype_size
        if chunk and size + nbytes > CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append((name, tensor))
        size += nbytes
    if chunk:
        yield chunk


class WeightSync:
    """One trainer -> one ditto LLM. ``path``: the shared-memory file (default
    /dev/shm/ditto-rl-<pid>); ``dtype``: what the engine holds (the export's, bfloat16)."""

    def __init__(self, llm, path: str = "", dtype: str = "bfloat16"):
        self.llm = llm
        self.dtype = dtype
        self.available = has_weight_transfer(llm)
        self.writer = None
        if self.available:
            self.writer = SharedMemoryWeightWriter(path or f"/dev/shm/ditto-rl-{os.getpid()}")
            llm.init_weight_transfer_engine({"init_info": {"path": self.writer.path}})

    @property
    def status(self) -> str:
        """One line for the run's header."""
        if self.available:
            return f"weight transfer: shared memory ({self.writer.path}), {self.dtype}"
        return ("weight transfer: NOT AVAILABLE in this ditto (LLM has no start_weight_update): the sampler keeps "
                "the weights it loaded, so every step after the first samples from the step-0 policy")

    def push(self, named_tensors: Dict[str, "object"], version: str) -> Dict[str, float]:
        """Sends every tensor (Hugging Face names, torch tensors in any float dtype, cast to the
        engine's) as one weight version. Returns {"pushed": bool, "seconds": float, "bytes": int}."""
        if not self.available:
            return {"pushed": False, "seconds": 0.0, "bytes": 0}
        start = time.perf_counter()
        total = 0
        self.writer.start()  # the last update has finished: its bytes may be overwritten
        self.llm.start_weight_update()
        for chunk in _chunks(named_tensors, 4 if self.dtype == "float32" else 2):
            info = self.writer.write(chunk, dtype=self.dtype)
            total += sum(t.numel() for _, t in chunk) * (4 if self.dtype == "float32" else 2)
            self.llm.update_weights({"update_info": info})
        self.llm.finish_weight_update(weight_version=version)
        return {"pushed": True, "seconds": time.perf_counter() - start, "bytes": total}

    def close(self) -> None:
        """Removes the shared-memory file."""
        if self.writer is not None:
            self.writer.close()


def push_weights(llm, policy, version: str, sync: "WeightSync" = None) -> Dict[str, float]:
    """Pushes ``policy.hf_state_dict()`` into ``llm`` as weight version ``version`` (a ``WeightSync``
    made for it once and passed back in, or a fresh one). See ``WeightSync.push``."""
    sync = sync or WeightSync(llm)
    return sync.push(policy.hf_state_dict(), version)
