"""Constants of the quantized formats (docs/specs/grouped_glu_mlp.md, "Quantization recipes").

Shared by the plain-PyTorch renderings (reference.py) and the Triton kernels (kernels.py), so
both read the same numbers.
"""

import numpy as np

FP32_MAX = float(np.finfo(np.float32).max)
E4M3_MAX = 448.0      # largest finite float8_e4m3fn
E2M1_MAX = 6.0        # largest E2M1 magnitude
NVFP4_GLOBAL = E4M3_MAX * E2M1_MAX   # 2688.0, exact in fp32
# The spec multiplies by the fp32 constant 1/6 instead of dividing by 6: bitwise parity with
# Transformer Engine depends on it. This is that constant, rounded once to fp32.
ONE_SIXTH_F32 = float(np.float32(1.0 / 6.0))

# E2M1 magnitudes by code 0..7; bit 3 of a code is the sign.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

FP8_BLOCKS = ((1, 128), (128, 128))
MXFP8_BLOCK = 32
NVFP4_BLOCK = 16

# The random Hadamard transform's fixed sign vector: Transformer Engine's wgrad sign vector, so
# transformed copies match its RHT. Bit i of the mask is set where sign i is -1.
RHT_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)
RHT_SIGN_MASK = sum(1 << i for i, s in enumerate(RHT_SIGNS) if s < 0)

# 128x4 swizzled scale layout: a tile of 128 scale rows x 4 scale columns is 512 bytes.
SWIZZLE_ROWS = 128
SWIZZLE_COLS = 4
