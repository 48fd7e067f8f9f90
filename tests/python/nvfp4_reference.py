"""An independent numpy model of NVFP4 quantization as src/quant/nvfp4.h defines it (the oracle that
tests/quant/test_nvfp4.cpp checks the C++ quantizer against, through the fixture
scripts/make_nvfp4_fixtures.py writes, and that the qlora_fp4 CLI test rounds a model folder with).

Written differently from the C++ on purpose: E2M1 and E4M3 by nearest-value search over the
formats' value lists (ties to the even code), not by bit arithmetic; every fp32 operation as a
numpy float32 operation (each rounded on its own).
"""
import numpy as np

F32 = np.float32
E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E2M1_VALUES = np.concatenate([E2M1_MAGNITUDES, -E2M1_MAGNITUDES]).astype(np.float32)  # code order


def _nearest_code(magnitude, grid):
    """Index of the grid value nearest to each magnitude (float64), ties to the even index."""
    distance = np.abs(magnitude[..., None] - grid)
    best = distance.min(axis=-1, keepdims=True)
    candidates = distance == best
    even = candidates & (np.arange(grid.size) % 2 == 0)
    return np.where(even.any(axis=-1), even.argmax(axis=-1), candidates.argmax(axis=-1))


def e2m1_codes(x):
    """float32 array -> E2M1 codes (uint8): round to nearest even, saturating at 6, signed zero, NaN -> +6."""
    x = np.asarray(x, dtype=np.float32)
    magnitude = np.minimum(np.abs(x.astype(np.float64)), 7.0)
    nan = np.isnan(x)
    codes = _nearest_code(np.where(nan, 0.0, magnitude), E2M1_MAGNITUDES).astype(np.uint8)
    codes |= np.where(np.signbit(x), 8, 0).astype(np.uint8)
    return np.where(nan, 7, codes).astype(np.uint8)


def _e4m3_magnitudes():
    values = []
    for code in range(0x7F):  # 0x7F is NaN
        exponent, mantissa = code >> 3, code & 7
        values.append(mantissa * 2.0 ** -9 if exponent == 0 else (8 + mantissa) * 2.0 ** (exponent - 10))
    return np.array(values)


E4M3_MAGNITUDES = _e4m3_magnitudes()


def e4m3_code(x):
    """A non-negative float32 scalar -> its E4M3 code: nearest, ties to the even code, saturating at 448."""
    return int(_nearest_code(np.array([min(float(x), 464.0)]), E4M3_MAGNITUDES)[0])


def e4m3_value(code):
    return F32(E4M3_MAGNITUDES[code])


def tensor_scale(amax, four_over_six):
    largest = F32(6 * (256 if four_over_six else 448))
    encode = F32(1)
    if amax > 0 and np.isfinite(amax):
        with np.errstate(over="ignore"):
            encode = min(F32(largest / F32(amax)), F32(np.finfo(np.float32).max))
    return F32(encode), F32(F32(1) / F32(encode))


def _candidate(x, encode, scaled_bmax, limit):
    code = e4m3_code(F32(scaled_bmax / F32(limit)))
    value = e4m3_value(code)
    if value > 0:
        factor = F32(encode / value)
        codes = e2m1_codes((x * factor).astype(np.float32))
    else:
        codes = np.zeros(x.size, np.uint8)
    return code, value, codes


def _squared_error(x, value, codes, decode):
    error = F32(0)
    for i in range(x.size):
        dequantized = F32(F32(E2M1_VALUES[codes[i]] * value) * decode)
        difference = F32(dequantized - x[i])
        error = F32(error + F32(difference * difference))
    return error


def quantize(weight, four_over_six):
    """float32 [rows, cols] -> (packed uint8 [rows, ceil(cols/2)], block scale codes uint8
    [rows, ceil(cols/16)], decode float32, dequantized float32 [rows, cols])."""
    weight = np.asarray(weight, dtype=np.float32)
    rows, cols = weight.shape
    encode, decode = tensor_scale(F32(np.abs(weight).max()), four_over_six)
    scale_cols = -(-cols // 16)
    codes = np.zeros((rows, cols), np.uint8)
    scales = np.zeros((rows, scale_cols), np.uint8)
    dequantized = np.zeros((rows, cols), np.float32)
    for row in range(rows):
        for block in range(scale_cols):
            x = weight[row, block * 16:(block + 1) * 16]
            scaled_bmax = F32(F32(np.abs(x).max()) * encode)
            chosen = _candidate(x, encode, scaled_bmax, 6)
            if four_over_six:
                four = _candidate(x, encode, scaled_bmax, 4)
                if _squared_error(x, four[1], four[2], decode) < _squared_error(x, chosen[1], chosen[2], decode):
                    chosen = four
            scales[row, block] = chosen[0]
            codes[row, block * 16:(block + 1) * 16] = chosen[2]
            dequantized[row, block * 16:(block + 1) * 16] = (
                (E2M1_VALUES[chosen[2]] * chosen[1]).astype(np.float32) * decode).astype(np.float32)
    padded = np.zeros((rows, cols + cols % 2), np.uint8)
    padded[:, :cols] = codes
    packed = (padded[:, 0::2] | (padded[:, 1::2] << 4)).astype(np.uint8)
    return packed, scales, decode, dequantized


def round_trip(weight, four_over_six=True):
    """The values a weight stands for after NVFP4 quantization (float32, the weight's shape)."""
    return quantize(weight, four_over_six)[3]
