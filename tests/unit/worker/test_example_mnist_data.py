"""The MNIST example reads real MNIST from a local file, fetches it only when asked, else synthesises digits."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.required import require_module

pytestmark = pytest.mark.tf
require_module("tensorflow")  # launcher.examples.mnist imports it

import numpy as np  # noqa: E402  (TensorFlow's dependency: imported after its check, so the fast lane collects this module)

from launcher.examples import mnist  # noqa: E402  (the project's own: imported, never skipped)


def fake_mnist(seed: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    split = lambda n: (rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8))  # noqa: E731
    return split(6), split(4)


@pytest.fixture
def no_local_mnist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mnist.MNIST_NPZ_ENV, raising=False)
    monkeypatch.setattr(Path, "home", lambda: tmp_path)


def test_a_local_npz_is_real_mnist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (x_train, y_train), (x_test, y_test) = fake_mnist(1)
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    monkeypatch.setenv(mnist.MNIST_NPZ_ENV, str(path))
    images, labels = mnist.load_split(train=False)
    assert images.shape == (4, 28, 28, 1) and images.dtype == np.float32
    np.testing.assert_allclose(images[..., 0], x_test / 255.0, rtol=1e-6)
    assert labels.tolist() == y_test.tolist()


def test_download_only_when_asked(no_local_mnist, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(mnist.tf.keras.datasets.mnist, "load_data", lambda: calls.append(1) or fake_mnist(2))
    synthetic, _ = mnist.load_split(train=True, train_examples=16)
    assert calls == [] and synthetic.shape == (16, 28, 28, 1)
    fetched, labels = mnist.load_split(train=True, download=True)
    assert calls == [1] and fetched.shape == (6, 28, 28, 1)
    assert labels.tolist() == fake_mnist(2)[0][1].tolist()
