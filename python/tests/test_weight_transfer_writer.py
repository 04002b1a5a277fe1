"""ditto.weight_transfer.SharedMemoryWeightWriter: the bytes at each update_info offset are the
tensor's little-endian row-major bytes in its dtype, offsets 64-byte aligned, the file grown as
needed and removed on close; bad input refused naming the tensor. No engine needed; torch cases run
where torch imports (Debian's python3-torch under /usr/bin/python3) and are skipped elsewhere."""
import os

import numpy as np
import pytest

from ditto.weight_transfer import ALIGNMENT, SharedMemoryWeightWriter, float32_to_bfloat16_bits


def read_back(path, info, i):
    dtype = {"float32": "<f4", "float16": "<f2", "bfloat16": "<u2"}[info["dtype_names"][i]]
    count = int(np.prod(info["shapes"][i]))
    with open(path, "rb") as f:
        f.seek(info["offsets"][i])
        data = f.read(count * np.dtype(dtype).itemsize)
    return np.frombuffer(data, dtype=dtype).reshape(info["shapes"][i])


def test_numpy_tensors_at_aligned_offsets(tmp_path):
    path = str(tmp_path / "shm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float16)
    c = rng.standard_normal((2, 3, 4)).astype(np.float32)[:, ::2]  # not contiguous
    with SharedMemoryWeightWriter(path) as w:
        info = w.write({"a": a, "b": b, "c": c})
        assert info["names"] == ["a", "b", "c"]
        assert info["dtype_names"] == ["float32", "float16", "float32"]
        assert info["shapes"] == [[3, 5], [7], [2, 2, 4]]
        assert info["offsets"] == [0, 64, 128]
        assert all(o % ALIGNMENT == 0 for o in info["offsets"])
        np.testing.assert_array_equal(read_back(path, info, 0), a)
        np.testing.assert_array_equal(read_back(path, info, 1), b)
        np.testing.assert_array_equal(read_back(path, info, 2), c)
        assert os.path.getsize(path) == 128 + c.nbytes
    assert not os.path.exists(path)  # close() removed it


def test_cast_to_bfloat16_rounds_to_nearest_even(tmp_path):
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38, np.inf, 1e-40], dtype=np.float32)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even (1.0); 1 + 3·2^-8 ties to 1 + 2^-6 (even).
    expected = np.array([0x3F80, 0x3F80, 0x3F82, 0xC020], dtype=np.uint16)
    with SharedMemoryWeightWriter(str(tmp_path / "shm")) as w:
        info = w.write([("v", values)], dtype="bfloat16")
        got = read_back(w.path, info, 0)
    assert info["dtype_names"] == ["bfloat16"]
    np.testing.assert_array_equal(got[:4], expected)
    np.testing.assert_array_equal(got, float32_to_bfloat16_bits(values))
    assert got[5] == 0x7F80  # inf stays inf
    assert float32_to_bfloat16_bits(np.array([np.nan], np.float32))[0] & 0x7FFF > 0x7F80


def test_chunks_of_one_update_lie_side_by_side_and_start_begins_again(tmp_path):
    # The engine borrows every chunk's bytes until finish_weight_update: a later chunk of the same
    # update must not overwrite an earlier one.
    with SharedMemoryWeightWriter(str(tmp_path / "shm")) as w:
        small = w.write({"x": np.ones(4, np.float32)})
        big = w.write({"y": np.arange(1000, dtype=np.float32), "z": np.full(3, 2, np.float32)})
        assert small["offsets"] == [0] and big["offsets"] == [64, 4096]
        assert w.size == 4096 + 12
        np.testing.assert_array_equal(read_back(w.path, small, 0), np.ones(4, np.float32))
        np.testing.assert_array_equal(read_back(w.path, big, 1), np.full(3, 2, np.float32))
        w.start()  # the next update
        again = w.write({"x": np.zeros(2, np.float32)})
        assert again["offsets"] == [0] and w.size == 4096 + 12  # never shrinks under the engine


def test_bad_input_is_refused_by_name(tmp_path):
    with SharedMemoryWeightWriter(str(tmp_path / "shm")) as w:
        with pytest.raises(ValueError, match="'layer.w'.*int64"):
            w.write({"layer.w": np.arange(3)})
        with pytest.raises(ValueError, match="'a' is given twice"):
            w.write([("a", np.ones(1, np.float32)), ("a", np.ones(1, np.float32))])
        with pytest.raises(TypeError, match="'a' is a list"):
            w.write({"a": [1.0, 2.0]})
        with pytest.raises(ValueError, match="dtype 'int8'"):
            w.write({"a": np.ones(1, np.float32)}, dtype="int8")
        with pytest.raises(ValueError, match="'a'.*float64"):
            w.write({"a": np.ones(1, np.float64)})
    with pytest.raises(ValueError, match="closed"):
        w.write({"a": np.ones(1, np.float32)})


def test_torch_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    master = torch.randn(4, 6, dtype=torch.float32, requires_grad=True)
    half = torch.randn(3, dtype=torch.float32).to(torch.bfloat16)
    with SharedMemoryWeightWriter(str(tmp_path / "shm")) as w:
        info = w.write({"w": master, "b": half, "t": master.t()}, dtype="bfloat16")
        assert info["dtype_names"] == ["bfloat16"] * 3 and info["shapes"] == [[4, 6], [3], [6, 4]]
        expect_w = master.detach().to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        np.testing.assert_array_equal(read_back(w.path, info, 0), expect_w)
        np.testing.assert_array_equal(read_back(w.path, info, 0), float32_to_bfloat16_bits(master.detach().numpy()))
        np.testing.assert_array_equal(read_back(w.path, info, 1), half.view(torch.int16).numpy().view(np.uint16))
        np.testing.assert_array_equal(read_back(w.path, info, 2), expect_w.T)
        kept = w.write({"w": master})  # no dtype: float32 as it is
        assert kept["dtype_names"] == ["float32"]
        np.testing.assert_array_equal(read_back(w.path, kept, 0), master.detach().numpy())
        with pytest.raises(ValueError, match="'i'.*int64"):
            w.write({"i": torch.arange(3)})
