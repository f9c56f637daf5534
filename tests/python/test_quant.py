"""ditto dequantises every block type exactly as the `gguf` package does (docs/numerics-quant.md):
random raw blocks, including f16 scales and minimums at every extreme (zeros of both signs,
subnormals, the largest finite values, infinities and NaNs), packed by ditto and read back as its
reference kernel reads weights (`ditto.dequantize`), against `gguf.quants.dequantize`: the same
f32 bits for every value.
"""
import warnings

import gguf
import numpy as np
import pytest

import ditto

TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]

# Byte offsets of each block type's f16 fields (ggml's block_* structs): the scale d, then the
# minimum (m for Q4_1/Q5_1, dmin for the K-quants) where there is one.
F16_FIELDS = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q2_K": [80, 82],
              "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}

# f16 bit patterns: +-0, the smallest and largest subnormals, the smallest normal, 1, the largest
# finite values, +-infinity, a quiet NaN, a signalling NaN and a negative NaN with a payload.
EXTREMES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00,
            0x7d00, 0xfe01]


def raw_blocks(type_name, count, seed):
    """`count` random blocks whose first len(EXTREMES)^2 blocks have every pair of extreme
    f16 values as (d, minimum); the other blocks' f16 fields are random bit patterns too."""
    _, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    blocks = np.random.default_rng(seed).integers(0, 256, size=(count, block_bytes), dtype=np.uint8)
    pairs = [(a, b) for a in EXTREMES for b in EXTREMES]
    for i, pair in enumerate(pairs):
        for offset, value in zip(F16_FIELDS[type_name], pair):
            blocks[i, offset:offset + 2] = np.array([value], dtype="<u2").view(np.uint8)
    return blocks


@pytest.mark.parametrize("type_name", TYPES)
def test_dequantisation_matches_gguf_bit_for_bit(type_name):
    blocks = raw_blocks(type_name, 2000, seed=TYPES.index(type_name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf * 0 and inf - inf in the extreme blocks
        expected = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[type_name]).reshape(-1)
    got = ditto.dequantize(type_name, blocks.tobytes())
    assert got.dtype == np.float32 and got.shape == expected.shape
    nan = np.isnan(expected)
    assert nan.any() and np.isinf(expected).any() and (expected[~nan] != 0).any()
    # NaN where gguf gives NaN; which NaN (sign, payload) is the hardware's choice of operand, in
    # numpy as in ditto, and is not part of the contract.
    assert np.array_equal(np.isnan(got), nan)
    mismatch = np.nonzero(got[~nan].view(np.uint32) != expected[~nan].view(np.uint32))[0]
    assert mismatch.size == 0, f"{mismatch.size} values differ, first at {np.nonzero(~nan)[0][mismatch[0]]}"


def test_dequantize_refuses_partial_blocks_and_unknown_types():
    with pytest.raises(ditto.Error, match="not whole q4_k blocks of 144 bytes"):
        ditto.dequantize("Q4_K", bytes(143))
    with pytest.raises(ditto.Error, match="unknown quantised type 'iq2_xxs'"):
        ditto.dequantize("IQ2_XXS", bytes(66))
