"""The trainer's side of ditto's shared-memory weight transfer (``weight_transfer_config={"backend":
"shm"}``): a plain file, usually under ``/dev/shm``, into which a trainer process writes tensors for
``LLM.update_weights``.

The layout is the one ``update_info`` describes: each tensor's raw little-endian, row-major
(C-contiguous) bytes in its dtype — ``bfloat16``, ``float16`` or ``float32`` — at its byte offset,
every offset a multiple of 64. ``names`` are Hugging Face's (``model.layers.0.self_attn.q_proj.weight``).
One ``write`` is one ``update_weights`` chunk, laid out after the chunks written before it: the
engine borrows the bytes of every chunk until ``finish_weight_update`` returns (it packs them
then, and allocates nothing for them), so no byte of an update may change before its finish.
``start()`` begins the next update at offset 0 again.

    writer = SharedMemoryWeightWriter(f"/dev/shm/ditto-rl-{os.getpid()}")
    llm.init_weight_transfer_engine({"init_info": {"path": writer.path}})
    writer.start()
    llm.start_weight_update()
    llm.update_weights({"update_info": writer.write(model.state_dict(), dtype="bfloat16")})
    llm.finish_weight_update(weight_version="step-1")
    writer.close()

torch is imported only when a torch tensor is written, so the writer works with numpy alone.
"""
import os
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

ALIGNMENT = 64
"""Every tensor's byte offset is a multiple of this."""

DTYPE_NAMES = ("bfloat16", "float16", "float32")
"""The dtypes the file holds, by their ``dtype_names`` spelling."""

_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4}


def _align(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 array -> uint16 array of bfloat16 bit patterns, same shape, rounded to nearest even
    (what ``torch.Tensor.to(torch.bfloat16)`` and ditto's ``f32_to_bf16`` do; a NaN stays a quiet NaN)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        rounded[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def _numpy_dtype_name(array: np.ndarray) -> Optional[str]:
    if array.dtype == np.float32:
        return "float32"
    if array.dtype == np.float16:
        return "float16"
    if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16
        return "bfloat16"
    return None


def _torch_payload(name: str, tensor: Any, dtype: Optional[str]) -> Tuple[str, List[int], np.ndarray]:
    import torch  # lazily: a numpy-only trainer never needs it

    by_name = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    if dtype is None:
        dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}.get(t.dtype)
        if dtype is None:
            raise ValueError(f"tensor {name!r}: torch dtype {t.dtype} is not one the engine takes "
                             f"({', '.join(DTYPE_NAMES)}); pass dtype= to cast")
    elif not t.is_floating_point():
        raise ValueError(f"tensor {name!r}: torch dtype {t.dtype} is not a floating-point type")
    t = t.to(by_name[dtype]).contiguous()
    # numpy has no bfloat16: the 16-bit patterns travel as int16, which keeps every byte.
    raw = t.view(torch.int16).numpy() if dtype != "float32" else t.numpy()
    return dtype, list(t.shape), raw


def _numpy_payload(name: str, array: np.ndarray, dtype: Optional[str]) -> Tuple[str, List[int], np.ndarray]:
    have = _numpy_dtype_name(array)
    if dtype is None:
        if have is None:
            raise ValueError(f"tensor {name!r}: numpy dtype {array.dtype} is not one the engine takes "
                             f"({', '.join(DTYPE_NAMES)}); pass dtype= to cast")
        dtype = have
    elif have != dtype:
        if array.dtype.kind != "f":
            raise ValueError(f"tensor {name!r}: numpy dtype {array.dtype} is not a floating-point type")
        if dtype == "bfloat16":
            array = float32_to_bfloat16_bits(array.astype(np.float32))
        else:
            array = array.astype(np.float16 if dtype == "float16" else np.float32)
    shape = list(array.shape)
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.byteswap().view(array.dtype.newbyteorder("<"))
    return dtype, shape, array


class SharedMemoryWeightWriter:
    """Writes named tensors into the shared-memory file ``path`` and says where they lie.

    ``path``: the file (``/dev/shm/ditto-rl-<pid>`` keeps it in memory); created, or truncated if it
    exists, and grown as tensors need. Not thread-safe: one writer, one thread.
    Errors: ``OSError`` when the file cannot be created or written.
    """

    def __init__(self, path: str):
        if not isinstance(path, str) or not path:
            raise ValueError("SharedMemoryWeightWriter: path must be a non-empty file path")
        self.path = path
        self._fd: Optional[int] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._size = 0
        self._next = 0  # where the next write's first tensor goes: after this update's chunks so far

    def start(self) -> None:
        """Begins a new update: the next write lays its tensors out from offset 0 again (the
        previous update must have finished: the engine no longer reads its bytes)."""
        self._next = 0

    def write(self, named_tensors: Union[Mapping[str, Any], Iterable[Tuple[str, Any]]],
              dtype: Optional[str] = None) -> Dict[str, list]:
        """Writes the tensors after this update's earlier chunks (from offset 0 after ``start()`` or
        on the first write) and returns ``update_info`` for ``LLM.update_weights``.

        ``named_tensors``: a mapping or (name, tensor) pairs, in the order they are laid out; each
        tensor a numpy array (float32, float16, or ml_dtypes' bfloat16) or a torch tensor (float32,
        float16, bfloat16; on any device, detached; it need not be contiguous), any shape.
        ``dtype``: ``"bfloat16"``, ``"float16"`` or ``"float32"`` casts every tensor to it (float32
        master weights -> the dtype the engine holds; round to nearest even); ``None`` keeps each one's.
        Returns ``{"names": [str], "dtype_names": [str], "shapes": [[int]], "offsets": [int]}``, one
        entry per tensor, offsets in bytes, 64-byte aligned, ascending.
        Errors: ``ValueError`` naming the tensor for a duplicate or non-string name, or a dtype the
        engine does not take; ``TypeError`` naming it for something that is not a tensor;
        ``ValueError`` when the writer was closed.
        """
        if self._fd is None:
            raise ValueError(f"SharedMemoryWeightWriter({self.path!r}) is closed")
        if dtype is not None and dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype {dtype!r}: the engine takes {', '.join(DTYPE_NAMES)}")
        items = named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors
        info: Dict[str, list] = {"names": [], "dtype_names": [], "shapes": [], "offsets": []}
        offset = self._next
        seen = set()
        for name, tensor in items:
            if not isinstance(name, str):
                raise ValueError(f"tensor name {name!r} is not a string")
            if name in seen:
                raise ValueError(f"tensor {name!r} is given twice")
            seen.add(name)
            if isinstance(tensor, np.ndarray):
                dtype_name, shape, payload = _numpy_payload(name, tensor, dtype)
            elif type(tensor).__module__.startswith("torch") and hasattr(tensor, "detach"):
                dtype_name, shape, payload = _torch_payload(name, tensor, dtype)
            else:
                raise TypeError(f"tensor {name!r} is a {type(tensor).__name__}, not a numpy array or torch tensor")
            nbytes = int(np.prod(shape, dtype=np.int64)) * _ITEMSIZE[dtype_name]
            assert payload.nbytes == nbytes, (name, payload.nbytes, nbytes)
            end = offset + nbytes
            if end > self._size:  # grow: the engine maps the file, so it must hold every byte named
                os.ftruncate(self._fd, end)
                self._size = end
            view = memoryview(payload.reshape(-1).view(np.uint8))
            written = 0
            while written < nbytes:
                written += os.pwrite(self._fd, view[written:], offset + written)
            info["names"].append(name)
            info["dtype_names"].append(dtype_name)
            info["shapes"].append(shape)
            info["offsets"].append(offset)
            offset = _align(end)
        self._next = offset
        return info

    @property
    def size(self) -> int:
        """The file's size in bytes (the largest update written so far)."""
        return self._size

    def close(self) -> None:
        """Closes and removes the file (the engine must be done reading). Safe to call twice."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __enter__(self) -> "SharedMemoryWeightWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: os may be gone
            pass
