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
    scales = rng.integers(2, 4, size=count)
    images = np.zeros((count, SIZE, SIZE), dtype=np.float32)
    for i, (label, scale) in enumerate(zip(labels, scales, strict=True)):
        glyph = np.kron(BITMAPS[int(label)], np.ones((scale, scale), dtype=np.float32))
        height, width = glyph.shape
        top = (SIZE - height) // 2 + rng.integers(-MAX_SHIFT, MAX_SHIFT + 1)
        left = (SIZE - width) // 2 + rng.integers(-MAX_SHIFT, MAX_SHIFT + 1)
        images[i, top : top + height, left : left + width] = glyph * rng.uniform(0.7, 1.0)
    images += rng.normal(0.0, NOISE, size=images.shape).astype(np.float32)
    return (np.clip(images, 0.0, 1.0) * 255).astype(np.uint8), labels
