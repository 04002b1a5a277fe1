"""ditto's GGML block formats against gguf-py, llama.cpp's own Python package (PyPI gguf 0.19.0, unpacked
into third_party/pypi by scripts/install-deps.sh; its numpy decoders follow ggml's dequantize_row_*).

    DITTO_QUANT_BLOCKS=build/tests/write_quant_blocks PYTHONPATH=third_party/pypi \\
        /usr/bin/python3 -m pytest -q tests/quant

`write_quant_blocks` writes one GGUF file: for each format ditto defines (src/kernels/quant.h), rows of
blocks (random bytes with random finite f16 scales; wholly random bytes; ditto's own quantize_row) and
ditto's float32 decoding of them. gguf-py reads the file with its own parser (type ids, block sizes)
and decodes the blocks with its own code; every value must have the same float32 bits (NaN: NaN on
both sides, payloads aside). ditto's float32 decoding is exact or correctly rounded (quant.h), and so
are gguf-py's float32 steps (each product exact, one rounding), so any difference is a layout or
formula error — even a zero's sign, since ditto multiplies in ggml's order where that sign could differ.
"""
import os
import subprocess

import numpy as np
import pytest

FORMATS = ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "Q5_0", "Q5_1", "Q5_K", "Q3_K", "Q2_K", "IQ4_NL", "IQ4_XS"]
GGML_IDS = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13,
            "Q6_K": 14, "IQ4_NL": 20, "IQ4_XS": 23}


def _gguf():
    try:
        import gguf
        import gguf.quants
    except ImportError as e:
        pytest.fail(f"gguf-py is missing ({e}): scripts/install-deps.sh unpacks PyPI gguf==0.19.0 into "
                    "third_party/pypi, which ctest puts on PYTHONPATH")
    return gguf


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    writer = os.environ.get("DITTO_QUANT_BLOCKS")
    if not writer:
        pytest.fail("DITTO_QUANT_BLOCKS must name the write_quant_blocks binary (ctest sets it)")
    path = tmp_path_factory.mktemp("quant") / "blocks.gguf"
    subprocess.run([writer, str(path)], check=True, timeout=120)
    return _gguf().GGUFReader(path)


def test_gguf_py_reads_every_type_id_and_block_size(blocks):
    gguf = _gguf()
    tensors = {t.name: t for t in blocks.tensors}
    assert sorted(n for n in tensors if not n.endswith(".f32")) == sorted(FORMATS)
    for name in FORMATS:
        t = tensors[name]
        assert t.tensor_type.name == name and int(t.tensor_type) == GGML_IDS[name]
        block_size, block_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type]
        rows, k = tensors[name + ".f32"].data.shape
        assert t.data.shape == (rows, k // block_size * block_bytes), name


@pytest.mark.parametrize("name", FORMATS)
def test_ditto_decodes_as_gguf_py_bit_for_bit(blocks, name):
    gguf = _gguf()
    tensors = {t.name: t for t in blocks.tensors}
    ref = np.asarray(gguf.quants.dequantize(tensors[name].data, tensors[name].tensor_type), dtype=np.float32)
    ours = np.asarray(tensors[name + ".f32"].data, dtype=np.float32)
    assert ref.shape == ours.shape
    both_nan = np.isnan(ref) & np.isnan(ours)
    differ = (ref.view(np.uint32) != ours.view(np.uint32)) & ~both_nan
    if differ.any():
        r, c = np.argwhere(differ)[0]
        pytest.fail(f"{name}: {int(differ.sum())} of {ref.size} values differ; first at row {r}, column {c}: "
                    f"gguf-py {ref[r, c]!r} ({ref.view(np.uint32)[r, c]:#010x}), "
                    f"ditto {ours[r, c]!r} ({ours.view(np.uint32)[r, c]:#010x})")
    assert np.isfinite(ours).sum() > ours.size // 2, "most values finite: the test compares numbers"
