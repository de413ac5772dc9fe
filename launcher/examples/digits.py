"""Deterministic synthetic 28x28 digit images, for when no MNIST file is on disk.

Contract: ``synthetic_digits(count, seed)`` returns ``(images uint8 [count,28,28],
labels uint8 [count])``; the same arguments always give the same arrays.
Each image is a 5x7 bitmap glyph of its digit, scaled 2-3x, placed up to
``MAX_SHIFT`` pixels off centre, with random stroke intensity and noise: easy enough for a
small CNN to learn in a few dozen steps, varied enough not to be trivial.
No TensorFlow, no network.
"""

from __future__ import annotations

import numpy as np

SIZE = 28
MAX_SHIFT = 3  # pixels off centre, each axis
SCALES = (2, 3)  # how many pixels a glyph's pixel becomes, each axis
NOISE = 0.1  # std of the additive Gaussian noise
GLYPHS = {
    0: ["01110", "10001", "10011", "10101", "11001", "10001", "01110"],
    1: ["00100", "01100", "00100", "00100", "00100", "00100", "01110"],
    2: ["01110", "10001", "00001", "00010", "00100", "01000", "11111"],
    3: ["11111", "00010", "00100", "00010", "00001", "10001", "01110"],
    4: ["00010", "00110", "01010", "10010", "11111", "00010", "00010"],
    5: ["11111", "10000", "11110", "00001", "00001", "10001", "01110"],
    6: ["00110", "01000", "10000", "11110", "10001", "10001", "01110"],
    7: ["11111", "00001", "00010", "00100", "01000", "01000", "01000"],
    8: ["01110", "10001", "10001", "01110", "10001", "10001", "01110"],
    9: ["01110", "10001", "10001", "01111", "00001", "00010", "01100"],
}
BITMAPS = {d: np.array([[c == "1" for c in row] for row in rows], dtype=np.float32) for d, rows in GLYPHS.items()}


def synthetic_digits(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=count).astype(np.uint8)
    scales = rng.integers(SCALES[0], SCALES[-1] + 1, size=count)
    shifts = rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, size=(count, 2))
    intensities = rng.uniform(0.7, 1.0, size=count).astype(np.float32)
    images = np.zeros((count, SIZE, SIZE), dtype=np.float32)
    for digit, bitmap in BITMAPS.items():  # one vectorised placement per glyph and scale, not one per image
        for scale in SCALES:
            chosen = np.flatnonzero((labels == digit) & (scales == scale))
            glyph = np.kron(bitmap, np.ones((scale, scale), dtype=np.float32))
            height, width = glyph.shape
            top = (SIZE - height) // 2 + shifts[chosen, 0]
            left = (SIZE - width) // 2 + shifts[chosen, 1]
            rows = top[:, None, None] + np.arange(height)[None, :, None]
            cols = left[:, None, None] + np.arange(width)[None, None, :]
            images[chosen[:, None, None], rows, cols] = glyph[None] * intensities[chosen, None, None]
    images += rng.standard_normal(size=images.shape, dtype=np.float32) * np.float32(NOISE)
    np.clip(images, 0.0, 1.0, out=images)
    images *= 255
    return images.astype(np.uint8), labels
