"""vLLM's API for reinforcement learning on ditto's LLM (docs/RL.md): weights updated in place
(init_weight_transfer_engine, start_weight_update, update_weights, finish_weight_update), the
weights' version, and sleep / wake_up.

The tensors of an update go by Hugging Face name, dtype and shape and are checked against the
model's tensor list; a refused chunk raises ValueError naming the tensor and cancels the whole
update (the old weights keep serving, bit for bit). After finish_weight_update, generation equals
an LLM loaded from a checkpoint holding the new tensors, bit for bit, and no prefix-cache hit
crosses versions. Every RequestOutput carries the version its tokens came from.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

# The transports ditto has on a CPU: "shm", a file the trainer writes (under /dev/shm: shared
# memory) and names in init_info; tensors handed over in the same process need no transport.
_BACKENDS = ("shm",)


def check_weight_transfer_config(config: Any) -> Optional[str]:
    """The backend of vLLM's weight_transfer_config (a dict or an object with .backend), or None.
    Raises ValueError for a backend ditto does not have ("nccl" and "ipc" move CUDA tensors)."""
    if config is None:
        return None
    backend = config.get("backend") if isinstance(config, dict) else getattr(config, "backend", None)
    if isinstance(config, dict) and set(config) - {"backend"}:
        raise ValueError(f"weight_transfer_config: unknown keys {sorted(set(config) - {'backend'})} "
                         "(ditto takes 'backend')")
    if backend not in _BACKENDS:
        raise ValueError(f"weight_transfer_config backend {backend!r} is not supported: ditto runs on CPUs and "
                         "takes 'shm' (a shared file the trainer writes, e.g. under /dev/shm); NCCL and CUDA IPC "
                         "move GPU tensors")
    return backend


def _field(request: Any, name: str) -> Any:
    """request[name] for a dict, request.name for vLLM's request objects."""
    if isinstance(request, dict):
        if name not in request:
            raise ValueError(f"the request has no '{name}' (give {{'{name}': {{...}}}})")
        return request[name]
    if not hasattr(request, name):
        raise ValueError(f"the request has no '{name}'")
    return getattr(request, name)


def _dtype_name(tensor: Any) -> str:
    """PyTorch's or numpy's dtype of `tensor` as a name the engine takes."""
    dtype = str(getattr(tensor, "dtype", ""))
    return dtype[len("torch."):] if dtype.startswith("torch.") else dtype


def _named_tensor(i: int, item: Any) -> tuple[str, Any, str]:
    """(name, tensor, dtype name) of named_tensors[i]: a (name, tensor) pair or a (name, tensor,
    dtype name) triple. Raises ValueError naming the entry."""
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise ValueError(f"named_tensors[{i}] must be (name, tensor) or (name, tensor, dtype name), got "
                         f"{type(item).__name__}")
    name, tensor = item[0], item[1]
    if not isinstance(name, str) or not name:
        raise ValueError(f"named_tensors[{i}]: the name must be a non-empty string, got {name!r}")
    if not hasattr(tensor, "shape") or not hasattr(tensor, "dtype"):
        raise ValueError(f"tensor '{name}' is a {type(tensor).__name__}, not a numpy array or torch tensor")
    dtype = item[2] if len(item) == 3 else _dtype_name(tensor)
    if not isinstance(dtype, str):
        raise ValueError(f"tensor '{name}': the dtype name must be a string such as 'bfloat16', got {dtype!r}")
    return name, tensor, dtype


def _buffer(tensor: Any) -> Any:
    """A C-contiguous buffer of `tensor`'s bytes: a numpy array as it is, a torch tensor through
    numpy (bfloat16 viewed as int16, which numpy lacks)."""
    if hasattr(tensor, "detach"):  # torch
        t = tensor.detach().contiguous()
        if str(t.dtype) == "torch.bfloat16":
            import torch  # only when the caller already uses torch
            t = t.view(torch.int16)
        return t.numpy()
    import numpy as np
    return np.ascontiguousarray(tensor)


class WeightTransferMixin:
    """The LLM methods of vLLM's weight-transfer API, over self._engine (ditto._ditto.Engine)."""

    def init_weight_transfer_engine(self, request: Any) -> None:
        """vLLM's init_weight_transfer_engine: request {"init_info": {"path": FILE}} (or an object
        with .init_info) names the file the trainer writes tensors into (the "shm" backend).
        Raises ValueError naming the field, FileNotFoundError when FILE is not there."""
        if not self.is_driver:  # a tensor-parallel rank other than 0: rank 0 sends them the tensors
            return None
        init_info = _field(request, "init_info")
        with self._lock:
            self._engine.init_weight_transfer_engine(json.dumps(init_info))

    def start_weight_update(self) -> None:
        """Starts an update: nothing changes until finish_weight_update, and generate() refuses to
        run until then. Raises ValueError while one is in progress, or for a model ditto cannot
        update (a GGUF file: its weights are GGUF's types)."""
        if not self.is_driver:  # a tensor-parallel rank other than 0: rank 0 sends them the tensors
            return None
        with self._lock:
            self._engine.start_weight_update()

    def update_weights(self, request: Any = None, *,
                       named_tensors: Optional[Iterable[tuple[str, Any]]] = None) -> None:
        """Sends one chunk of the update; call it any number of times.

        request: vLLM's {"update_info": {"names", "dtype_names", "shapes", "offsets"}}: the tensors'
            bytes at those byte offsets of the init_weight_transfer_engine file.
        named_tensors: ditto's in-process form: (Hugging Face name, tensor) pairs of numpy arrays or
            torch tensors ([out_features, in_features] / [n]; matrices in the dtype the checkpoint
            holds, e.g. bfloat16), or (name, tensor, dtype name) triples for raw bytes of another
            dtype (bfloat16 held as numpy uint16: numpy has no bfloat16). Their memory is held,
            and must not change, until finish_weight_update.
        Raises ValueError naming the tensor (unknown name, shape, dtype, byte count) and cancels
        the update: the old weights keep serving."""
        if not self.is_driver:  # a tensor-parallel rank other than 0: rank 0 sends them the tensors
            return None
        if (request is None) == (named_tensors is None):
            raise ValueError("update_weights: give a request with update_info, or named_tensors")
        with self._lock:
            if request is not None:
                self._engine.update_weights_shm(json.dumps(_field(request, "update_info")))
                return
            names, dtypes, shapes, buffers = [], [], [], []
            try:
                for i, item in enumerate(named_tensors):
                    name, tensor, dtype = _named_tensor(i, item)
                    names.append(name)
                    dtypes.append(dtype)
                    shapes.append([int(d) for d in tensor.shape])
                    buffers.append(_buffer(tensor))
            except (TypeError, ValueError, AttributeError, IndexError) as e:
                # The chunk is refused whole, and with it the update, as the engine's checks do.
                self._engine.cancel_weight_update()
                raise ValueError(f"update_weights: {e}; the update is cancelled (nothing of it was applied: the old "
                                 "weights keep serving); start again with start_weight_update") from None
            self._engine.update_weights_buffers(names, dtypes, shapes, buffers)

    def finish_weight_update(self, weight_version: Optional[str] = None) -> str:
        """Applies the update, in place, and returns the weights' new version: `weight_version`, or
        "1", "2", ... counting updates. Raises ValueError with no update in progress."""
        if not self.is_driver:  # a tensor-parallel rank other than 0: rank 0 sends them the tensors
            return None
        with self._lock:
            self._engine.finish_weight_update(weight_version or "")
            return self._engine.weight_version

    def update_weights_from_tensors(self, named_tensors: Iterable[tuple[str, Any]],
                                    weight_version: Optional[str] = None) -> str:
        """start_weight_update, update_weights(named_tensors=...), finish_weight_update in one call."""
        if not self.is_driver:
            return None
        self.start_weight_update()
        self.update_weights(named_tensors=named_tensors)
        return self.finish_weight_update(weight_version)

    @property
    def weight_version(self) -> Optional[str]:
        """The weights' version: "0" as loaded, then what the last finish_weight_update set (None on
        a tensor-parallel rank other than 0)."""
        return self._engine.weight_version if self.is_driver else None

    def sleep(self, level: int = 1) -> None:
        """vLLM's sleep: gives back the KV cache, activation buffers and prefix cache (level 1; on a
        CPU the weights are already in host memory, so level 1 keeps them), and with level 2 the
        weights' memory too: then send every tensor (start/update/finish_weight_update) before
        generating again. Raises ValueError for another level."""
        if not self.is_driver:  # a tensor-parallel rank other than 0: rank 0 sends them the tensors
            return None
        if level not in (1, 2):
            raise ValueError(f"sleep: level must be 1 or 2, got {level!r}")
        with self._lock:
            self._engine.sleep(level)

    def wake_up(self, tags: Optional[list[str]] = None) -> None:
        """vLLM's wake_up. Raises ValueError after sleep(level=2) until every tensor was sent."""
        if not self.is_driver:  # a tensor-parallel rank other than 0: rank 0 sends them the tensors
            return None
        if tags is not None and not set(tags) <= {"weights", "kv_cache"}:
            raise ValueError(f"wake_up: tags must be among 'weights' and 'kv_cache', got {tags!r}")
        with self._lock:
            self._engine.wake_up()

    def is_sleeping(self) -> bool:
        return self.is_driver and self._engine.is_sleeping

