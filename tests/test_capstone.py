"""Tests of gpucourse.capstone: offline data, the CNN, the training loop and its measurements, budgets, costs."""

from __future__ import annotations

import gzip
import importlib.util
import io
import math
import shutil
import socket
import tarfile
import time
from dataclasses import replace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpucourse import capstone  # noqa: E402
from gpucourse.capstone import ImageData, TrainConfig  # noqa: E402

torch = pytest.importorskip("torch")

PROPERTY = settings(deadline=None, max_examples=50, derandomize=True, database=None)
REAL_PROBE = capstone.network_available  # the fixture below replaces both where downloads look them up (capstone.datasets)
REAL_FETCH = capstone.fetch_url
BAD_NUMBERS = [("1", TypeError), (None, TypeError), (True, TypeError), (-1.0, ValueError), (float("nan"), ValueError)]


@pytest.fixture(autouse=True)
def _offline_and_tidy(monkeypatch, tmp_path):
    """No test may download: the network probe says no, fetching fails loudly, the cache is empty. Figures closed."""
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: False)

    def no_fetch(url, destination, timeout_s=30.0):
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(capstone.datasets, "fetch_url", no_fetch)
    monkeypatch.setenv(capstone.DATA_DIR_VARIABLE, str(tmp_path / "empty-cache"))
    monkeypatch.delenv(capstone.OFFLINE_VARIABLE, raising=False)
    yield
    plt.close("all")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One CPU thread, as the lesson uses for this tiny CNN: far steadier timings on a shared, busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def digits() -> ImageData:
    return capstone.load_digits_data(seed=0)


# --------------------------------------------------------------------------- data

def write_idx(path, array: np.ndarray, *, compress: bool = True) -> None:
    """Write ``array`` (unsigned bytes) in the IDX format, written here byte by byte from its definition."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    payload = header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    if compress:
        with gzip.open(path, "wb") as handle:
            handle.write(payload)
    else:
        path.write_bytes(payload)


def fake_mnist(folder, n_train: int = 60, n_test: int = 20, size: int = 28, seed: int = 0) -> dict:
    """The four IDX files of a tiny MNIST-like dataset in ``folder``; returns the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = {"train_images": rng.integers(0, 256, (n_train, size, size), dtype=np.uint8),
              "train_labels": rng.integers(0, 10, n_train).astype(np.uint8),
              "test_images": rng.integers(0, 256, (n_test, size, size), dtype=np.uint8),
              "test_labels": rng.integers(0, 10, n_test).astype(np.uint8)}
    folder.mkdir(parents=True, exist_ok=True)
    for key, filename in capstone.IDX_FILES.items():
        write_idx(folder / filename, arrays[key])
    return arrays


class CountingFetch:
    """Stands in for capstone.fetch_url: copies from a local folder and counts what was asked for."""

    def __init__(self, source) -> None:
        self.source, self.urls = source, []

    def __call__(self, url, destination, timeout_s=30.0):
        self.urls.append(url)
        shutil.copyfile(self.source / url.rsplit("/", 1)[1], destination)


def test_read_idx_reads_what_the_format_defines(tmp_path):
    images = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    write_idx(tmp_path / "x-idx3-ubyte.gz", images)
    write_idx(tmp_path / "y-idx1-ubyte", np.array([7, 1], np.uint8), compress=False)
    np.testing.assert_array_equal(capstone.read_idx(tmp_path / "x-idx3-ubyte.gz"), images)
    np.testing.assert_array_equal(capstone.read_idx(tmp_path / "y-idx1-ubyte"), [7, 1])
    (tmp_path / "big-endian.idx").write_bytes(bytes([0, 0, 0x0C, 1, 0, 0, 0, 2]) + np.array([1, -2], ">i4").tobytes())
    assert capstone.read_idx(tmp_path / "big-endian.idx").tolist() == [1, -2]


@pytest.mark.parametrize("content, message", [
    (b"not gzip at all", "not a readable IDX"),
    (gzip.compress(b"\x00\x00\x08\x03" + (5).to_bytes(4, "big"), mtime=0), "truncated"),
    (gzip.compress(b"\x08\x08\x08\x01" + (1).to_bytes(4, "big") + b"x", mtime=0), "IDX header"),
    (gzip.compress(b"\x00\x00\x08\x01" + (4).to_bytes(4, "big") + b"abc", mtime=0), "header says"),
    (gzip.compress(b"\x00\x00\x08\x01" + (4).to_bytes(4, "big") + b"abc", mtime=0)[:-6], "not a readable IDX"),
])
def test_read_idx_rejects_corrupt_files(tmp_path, content, message):
    path = tmp_path / "bad-idx1-ubyte.gz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        capstone.read_idx(path)


def test_download_from_a_mirror_then_from_the_cache(tmp_path, monkeypatch):
    """The real download path against a local file:// mirror: shapes, dtypes, scaling, then no second fetch."""
    arrays = fake_mnist(tmp_path / "mirror")
    monkeypatch.undo()  # the real fetch_url (urllib), but still no network: file:// needs none
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: pytest.fail("file:// needs no probe"))
    cache = tmp_path / "cache"
    data = capstone.load_data("mnist", mirrors=[(tmp_path / "mirror").as_uri()], cache_dir=cache)
    assert data.name == "mnist" and data.fallback_reason is None and data.target_accuracy == 0.96
    assert data.train_x.shape == (60, 1, 28, 28) and data.test_x.shape == (20, 1, 28, 28)
    assert data.train_x.dtype == np.float32 and data.train_y.dtype == np.int64
    np.testing.assert_allclose(data.test_x[:, 0], arrays["test_images"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(data.train_y, arrays["train_labels"])
    assert sorted(p.name for p in (cache / "mnist").iterdir()) == sorted(capstone.IDX_FILES.values())
    fetch = CountingFetch(tmp_path / "mirror")
    monkeypatch.setattr(capstone.datasets, "fetch_url", fetch)
    again = capstone.load_data("mnist", mirrors=["https://mirror.invalid/mnist/"], cache_dir=cache, limit_train=10)
    assert fetch.urls == [] and again.name == "mnist" and len(again.train_y) == 10
    offline = capstone.load_data("mnist", offline=True, cache_dir=cache)  # the cache needs no network
    assert offline.name == "mnist" and offline.fallback_reason is None


def test_download_goes_to_the_next_mirror_and_refetches_a_corrupt_cache(tmp_path, monkeypatch):
    fake_mnist(tmp_path / "mirror", size=12)
    fetch = CountingFetch(tmp_path / "mirror")
    monkeypatch.setattr(capstone.datasets, "fetch_url", fetch)
    monkeypatch.setattr(capstone.datasets, "network_available", lambda host, timeout_s=3.0: host[0] != "down.invalid")
    cache = tmp_path / "cache"
    data = capstone.load_data("fashion_mnist", mirrors=["https://down.invalid/", "https://up.invalid/f/"],
                              cache_dir=cache)
    assert data.name == "fashion_mnist" and data.image_size == 12 and len(fetch.urls) == 4
    assert all(url.startswith("https://up.invalid/f/") for url in fetch.urls)
    (cache / "fashion_mnist" / capstone.IDX_FILES["train_labels"]).write_bytes(b"garbage")  # a corrupt cache
    data = capstone.load_data("fashion_mnist", mirrors=["https://up.invalid/f/"], cache_dir=cache)
    assert data.name == "fashion_mnist" and len(fetch.urls) == 8  # every file fetched again, then read
    assert data.class_names[0] == "T-shirt/top" and data.target_accuracy == capstone.DATASETS["fashion_mnist"]["target"]


def test_a_corrupt_download_falls_back_to_the_digits_and_keeps_nothing(tmp_path, monkeypatch):
    fake_mnist(tmp_path / "mirror")
    (tmp_path / "mirror" / capstone.IDX_FILES["test_images"]).write_bytes(gzip.compress(b"\x00\x00\x08\x03short"))
    monkeypatch.setattr(capstone.datasets, "fetch_url", CountingFetch(tmp_path / "mirror"))
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: True)
    data = capstone.load_data("mnist", mirrors=["https://up.invalid/"], cache_dir=tmp_path / "cache")
    assert data.name == "digits" and "download failed" in data.fallback_reason and "truncated" in data.fallback_reason
    assert not any((tmp_path / "cache" / "mnist").iterdir())  # no half-valid files left to trust next time


def test_files_that_are_not_mnist_like_are_rejected(tmp_path, monkeypatch):
    arrays = fake_mnist(tmp_path / "mirror")
    write_idx(tmp_path / "mirror" / capstone.IDX_FILES["train_labels"], arrays["train_labels"][:-1])
    monkeypatch.setattr(capstone.datasets, "fetch_url", CountingFetch(tmp_path / "mirror"))
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: True)
    data = capstone.load_data("mnist", mirrors=["https://up.invalid/"], cache_dir=tmp_path / "cache")
    assert data.name == "digits" and "one per image" in data.fallback_reason


def test_real_fetch_url_writes_atomically(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(b"0123456789" * 1000)
    REAL_FETCH(source.as_uri(), tmp_path / "sub" / "copy.bin")
    assert (tmp_path / "sub" / "copy.bin").read_bytes() == source.read_bytes()
    with pytest.raises(OSError):
        REAL_FETCH((tmp_path / "missing.bin").as_uri(), tmp_path / "sub" / "never.bin")
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["copy.bin"]  # no .part file left behind


def test_fallback_dataset_loads_offline_with_the_right_shapes(digits):
    data = capstone.load_data("mnist")
    assert data.name == "digits" and "cannot be reached" in data.fallback_reason
    assert len(data.train_y) + len(data.test_y) == 1797 and len(data.test_y) == 359
    assert data.train_x.shape == (len(data.train_y), 1, 8, 8) and data.test_x.shape == (359, 1, 8, 8)
    assert data.train_x.dtype == np.float32 and data.train_y.dtype == np.int64
    assert 0.0 <= data.train_x.min() and data.train_x.max() == 1.0
    assert set(np.unique(data.train_y)) == set(range(10)) and set(np.unique(data.test_y)) <= set(range(10))
    assert data.image_size == 8 and data.num_classes == 10 and data.target_accuracy == 0.95
    assert "fallback because" in data.describe() and "8x8" in data.describe()
    assert "measured" in data.target_source
    np.testing.assert_array_equal(data.train_y, digits.train_y)  # the same seed gives the same split


def test_offline_variable_and_argument_skip_the_download(monkeypatch):
    def no_probe(*args, **kwargs):
        raise AssertionError("offline mode must not probe the network")

    monkeypatch.setattr(capstone.datasets, "network_available", no_probe)
    assert "GPUCOURSE_OFFLINE" in capstone.load_data("fashion_mnist", offline=True).fallback_reason
    monkeypatch.setenv(capstone.OFFLINE_VARIABLE, "1")
    data = capstone.load_data("mnist")
    assert data.name == "digits" and "GPUCOURSE_OFFLINE" in data.fallback_reason
    assert capstone.load_data("digits").fallback_reason is None


def test_every_dataset_documents_its_target():
    for name, info in capstone.DATASETS.items():
        assert 0.5 <= info["target"] < 1 and len(info["target_note"]) > 40, name
    assert "not yet measured" in capstone.DATASETS["mnist"]["target_note"]
    cifar = capstone.DATASETS["cifar10"]
    assert cifar["target"] == 0.50 and cifar["target_note"].startswith("not measured by the course")
    assert "Training a Classifier" in cifar["target_note"] and "54%" in cifar["target_note"]


def test_subset_is_random_deterministic_and_bounded(digits):
    small = digits.subset(100, 50, seed=3)
    assert (len(small.train_y), len(small.test_y)) == (100, 50)
    np.testing.assert_array_equal(small.train_y, digits.subset(100, 50, seed=3).train_y)
    assert len(digits.subset(10**6).train_y) == len(digits.train_y)


def test_network_probe_against_local_sockets():
    """The real probe, against this machine only."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert REAL_PROBE(("127.0.0.1", port), timeout_s=2.0) is True
    start = time.perf_counter()
    assert REAL_PROBE(("127.0.0.1", port), timeout_s=1.0) is False  # closed now
    assert time.perf_counter() - start < 1.5


@pytest.mark.parametrize("call, error", [
    (lambda: capstone.load_data("imagenet"), ValueError),
    (lambda: capstone.load_data(7), TypeError),
    (lambda: capstone.load_data("mnist", offline="yes"), TypeError),
    (lambda: capstone.load_data("mnist", limit_train=0), ValueError),
    (lambda: capstone.load_data("mnist", timeout_s=0), ValueError),
    (lambda: capstone.load_digits_data(test_fraction=1.5), ValueError),
    (lambda: REAL_PROBE("localhost"), TypeError),
    (lambda: REAL_PROBE(("localhost", 1), timeout_s=-1), ValueError),
    (lambda: capstone.download_dataset("digits"), ValueError),
    (lambda: capstone.download_dataset("mnist", mirrors=5), TypeError),
    (lambda: capstone.download_dataset("mnist", mirrors=["ftp://example.org/"]), ValueError),
    (lambda: capstone.download_dataset("mnist", download="yes"), TypeError),
    (lambda: capstone.download_dataset("cifar10", full_size="no"), TypeError),
    (lambda: capstone.read_cifar10("cifar-10-binary.tar.gz", full_size=0), TypeError),
])
def test_data_functions_reject_bad_arguments(call, error):
    with pytest.raises(error):
        call()


def test_image_data_rejects_malformed_arrays(digits):
    with pytest.raises(ValueError, match="raw_train"):
        ImageData("digits", "x", np.zeros((3, 8, 4), np.uint8), np.zeros(3, np.int64), digits.raw_test,
                  digits.test_y, 16.0, digits.class_names, 0.9)
    with pytest.raises(ValueError, match="train_y"):
        ImageData("digits", "x", digits.raw_train, digits.train_y[:-1], digits.raw_test, digits.test_y, 16.0,
                  digits.class_names, 0.9)
    with pytest.raises(ValueError, match="target_accuracy"):
        ImageData("digits", "x", digits.raw_train, digits.train_y, digits.raw_test, digits.test_y, 16.0,
                  digits.class_names, 1.5)
    with pytest.raises(ValueError, match="raw_train"):  # colour images have exactly three channels, last
        ImageData("digits", "x", np.zeros((3, 8, 8, 4), np.uint8), np.zeros(3, np.int64), digits.raw_test,
                  digits.test_y, 16.0, digits.class_names, 0.9)
    with pytest.raises(ValueError, match="raw_test"):  # grey training images, colour test images
        ImageData("digits", "x", digits.raw_train, digits.train_y, np.zeros((2, 8, 8, 3), np.uint8),
                  np.zeros(2, np.int64), 16.0, digits.class_names, 0.9)


def test_grey_images_keep_one_channel_and_their_bytes(digits):
    assert digits.channels == 1 and digits.train_x.shape == (len(digits.train_y), 1, 8, 8)
    np.testing.assert_array_equal(digits.test_x, (digits.raw_test.astype(np.float32) / np.float32(16.0))[:, None])
    assert "colour" not in digits.describe()


# --------------------------------------------------------------------------- CIFAR-10 (binary version)

CIFAR_RECORD = 1 + 3 * 32 * 32


def cifar_record(label: int, planes: np.ndarray) -> bytes:
    """One record as CIFAR-10's page defines it: the label byte, then red, green and blue 32x32 planes, row-major."""
    assert planes.shape == (3, 32, 32)
    return bytes([label]) + b"".join(np.ascontiguousarray(plane, np.uint8).tobytes() for plane in planes)


def write_tar_gz(path, members: dict) -> None:
    """A gzip-compressed tar archive holding ``members`` (name -> bytes)."""
    with tarfile.open(path, "w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))


def fake_cifar10(folder, per_batch: int = 3, n_test: int = 4, seed: int = 0, **replace_members) -> dict:
    """A tiny cifar-10-binary.tar.gz in ``folder``: ``per_batch`` records in each of the five training batches.

    Training image 0 is black but for one red pixel (row 2, column 5); ``replace_members`` swaps a member's bytes
    (None drops it). Returns the labels and the (N, 3, 32, 32) planes written.
    """
    rng = np.random.default_rng(seed)
    planes = {"train": rng.integers(0, 256, (5 * per_batch, 3, 32, 32), dtype=np.uint8),
              "test": rng.integers(0, 256, (n_test, 3, 32, 32), dtype=np.uint8)}
    planes["train"][0] = 0
    planes["train"][0, 0, 2, 5] = 255
    labels = {"train": rng.integers(0, 10, 5 * per_batch), "test": rng.integers(0, 10, n_test)}
    members = {"cifar-10-batches-bin/batches.meta.txt": b"airplane\nautomobile\n"}
    for batch in range(5):
        rows = range(batch * per_batch, (batch + 1) * per_batch)
        members[f"cifar-10-batches-bin/data_batch_{batch + 1}.bin"] = b"".join(
            cifar_record(int(labels["train"][i]), planes["train"][i]) for i in rows)
    members["cifar-10-batches-bin/test_batch.bin"] = b"".join(
        cifar_record(int(labels["test"][i]), planes["test"][i]) for i in range(n_test))
    for short_name, content in replace_members.items():
        name = f"cifar-10-batches-bin/{short_name}.bin"
        if content is None:
            del members[name]
        else:
            members[name] = content
    folder.mkdir(parents=True, exist_ok=True)
    write_tar_gz(folder / capstone.CIFAR10_ARCHIVE, members)
    return {"planes": planes, "labels": labels}


def test_cifar10_from_a_file_mirror_then_from_the_cache(tmp_path, monkeypatch):
    """The real download path (urllib on a file:// mirror) reads the archive's records into colour images."""
    written = fake_cifar10(tmp_path / "mirror")
    monkeypatch.undo()  # the real fetch_url, still no network: file:// needs none
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: pytest.fail("file:// needs no probe"))
    cache = tmp_path / "cache"
    data = capstone.download_dataset("cifar10", mirrors=[(tmp_path / "mirror").as_uri()], cache_dir=cache,
                                     full_size=False)
    assert data.name == "cifar10" and data.fallback_reason is None and data.target_accuracy == 0.50
    assert data.channels == 3 and data.image_size == 32 and data.class_names[0] == "airplane"
    assert data.raw_train.shape == (15, 32, 32, 3) and data.raw_train.dtype == np.uint8
    assert data.train_x.shape == (15, 3, 32, 32) and data.test_x.shape == (4, 3, 32, 32)
    assert data.train_x.dtype == np.float32 and data.train_x.flags.c_contiguous and data.train_y.dtype == np.int64
    assert data.raw_train[0, 2, 5].tolist() == [255, 0, 0]  # the red plane's pixel is red
    assert data.train_x[0, :, 2, 5].tolist() == [1.0, 0.0, 0.0] and data.train_x[0].sum() == 1.0  # channel 0
    np.testing.assert_allclose(data.test_x, written["planes"]["test"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(data.train_y, written["labels"]["train"])
    np.testing.assert_array_equal(data.test_y, written["labels"]["test"])
    assert "32x32 colour" in data.describe() and "15 training" in data.describe()
    assert data.subset(5, 2).train_x.shape == (5, 3, 32, 32)
    assert [p.name for p in (cache / "cifar10").iterdir()] == [capstone.CIFAR10_ARCHIVE]
    fetch = CountingFetch(tmp_path / "mirror")
    monkeypatch.setattr(capstone.datasets, "fetch_url", fetch)
    again = capstone.download_dataset("cifar10", mirrors=["https://mirror.invalid/"], cache_dir=cache,
                                      download=False, full_size=False)
    assert fetch.urls == [] and len(again.train_y) == 15


def test_cifar10_corrupt_cache_is_fetched_again(tmp_path, monkeypatch):
    fake_cifar10(tmp_path / "mirror", per_batch=2, n_test=2)
    fetch = CountingFetch(tmp_path / "mirror")
    monkeypatch.setattr(capstone.datasets, "fetch_url", fetch)
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: True)
    cache = tmp_path / "cache"
    first = capstone.download_dataset("cifar10", mirrors=["https://up.invalid/c/"], cache_dir=cache, full_size=False)
    assert fetch.urls == ["https://up.invalid/c/cifar-10-binary.tar.gz"] and len(first.train_y) == 10
    archive = cache / "cifar10" / capstone.CIFAR10_ARCHIVE
    archive.write_bytes(archive.read_bytes()[:1000])  # a truncated cache
    again = capstone.download_dataset("cifar10", mirrors=["https://up.invalid/c/"], cache_dir=cache, full_size=False)
    assert len(fetch.urls) == 2 and len(again.train_y) == 10 and again.channels == 3


def test_cifar10_real_size_check_rejects_a_small_archive_unless_told(tmp_path, monkeypatch):
    fake_cifar10(tmp_path)
    path = tmp_path / capstone.CIFAR10_ARCHIVE
    with pytest.raises(ValueError, match="15 train records, the real CIFAR-10 50,000"):
        capstone.read_cifar10(path)
    assert capstone.read_cifar10(path, full_size=False)["train_images"].shape == (15, 32, 32, 3)
    monkeypatch.setattr(capstone.datasets, "fetch_url", CountingFetch(tmp_path))
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: True)
    with pytest.raises(OSError, match="50,000"):  # download_dataset checks the real size by default
        capstone.download_dataset("cifar10", mirrors=["https://up.invalid/"], cache_dir=tmp_path / "cache")
    assert not any((tmp_path / "cache" / "cifar10").iterdir())


@pytest.mark.parametrize("members, message", [
    ({"data_batch_3": None}, "lacks cifar-10-batches-bin/data_batch_3.bin"),
    ({"test_batch": b"\x01" * (CIFAR_RECORD - 1)}, "not a whole number of 3,073-byte records"),
    ({"data_batch_1": b""}, "not a whole number"),
    ({"test_batch": bytes([10]) + bytes(CIFAR_RECORD - 1)}, "labels must be class numbers 0-9"),
])
def test_read_cifar10_rejects_archives_that_are_not_cifar10(tmp_path, members, message):
    fake_cifar10(tmp_path, **members)
    with pytest.raises(ValueError, match=message):
        capstone.read_cifar10(tmp_path / capstone.CIFAR10_ARCHIVE, full_size=False)


@pytest.mark.parametrize("content", [b"not gzip at all", gzip.compress(b"gzip but no tar " * 64, mtime=0)])
def test_read_cifar10_rejects_files_that_are_not_tar_gz(tmp_path, content):
    path = tmp_path / capstone.CIFAR10_ARCHIVE
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a readable tar.gz"):
        capstone.read_cifar10(path, full_size=False)


def test_cifar10_falls_back_to_the_digits_like_mnist(tmp_path, monkeypatch):
    offline = capstone.load_data("cifar10", offline=True)
    assert offline.name == "digits" and "GPUCOURSE_OFFLINE" in offline.fallback_reason and offline.channels == 1
    unreachable = capstone.load_data("cifar10")  # the fixture's probe: no network
    assert unreachable.name == "digits" and "www.cs.toronto.edu cannot be reached" in unreachable.fallback_reason
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / capstone.CIFAR10_ARCHIVE).write_bytes(b"an error page, not an archive")
    monkeypatch.setattr(capstone.datasets, "fetch_url", CountingFetch(tmp_path / "mirror"))
    monkeypatch.setattr(capstone.datasets, "network_available", lambda *args, **kwargs: True)
    corrupt = capstone.load_data("cifar10", mirrors=["https://up.invalid/"], cache_dir=tmp_path / "cache")
    assert corrupt.name == "digits" and "download failed" in corrupt.fallback_reason
    assert "not a readable tar.gz" in corrupt.fallback_reason
    assert not any((tmp_path / "cache" / "cifar10").iterdir())  # nothing half-valid kept


# --------------------------------------------------------------------------- the model

@pytest.mark.parametrize("size, params, flops", [
    (8, 160 + 4640 + 1290, 3 * (2 * 64 * 16 * 9 + 2 * 16 * 32 * 16 * 9 + 2 * 32 * 4 * 10)),
    (28, 160 + 4640 + 15690, 3 * (2 * 784 * 16 * 9 + 2 * 196 * 32 * 16 * 9 + 2 * 32 * 49 * 10)),
])
def test_cnn_parameters_and_flops(size, params, flops):
    model = capstone.small_cnn(size)
    assert capstone.count_parameters(model) == params
    assert capstone.training_flops_per_image(size) == flops
    assert model(torch.zeros(2, 1, size, size)).shape == (2, 10)


def test_cnn_takes_colour_images():
    grey, colour = capstone.small_cnn(12), capstone.small_cnn(12, in_channels=3)
    assert capstone.count_parameters(colour) - capstone.count_parameters(grey) == 2 * 16 * 9  # two more input planes
    assert colour(torch.zeros(2, 3, 12, 12)).shape == (2, 10)
    with pytest.raises(RuntimeError):
        grey(torch.zeros(2, 3, 12, 12))
    extra_conv1 = 2 * 12 * 12 * 16 * 2 * 9  # two more input planes into the first convolution, forward
    assert capstone.training_flops_per_image(12, in_channels=3) - capstone.training_flops_per_image(12) == 3 * extra_conv1


def test_colour_data_trains_through_every_feed(digits):
    """A colour ImageData (N, H, W, 3) trains with the loader feed (per-image conversion) and preloaded on the device."""
    small = digits.subset(200, 80)
    colour = replace(small, raw_train=np.repeat(small.raw_train[..., None], 3, axis=-1),
                     raw_test=np.repeat(small.raw_test[..., None], 3, axis=-1))
    assert colour.channels == 3 and colour.train_x.shape == (200, 3, 8, 8)
    for feed in ("loader", "preloaded"):
        result = capstone.train(colour, TrainConfig(epochs=1, batch_size=50, feed=feed, device="cpu"), progress=False)
        assert next(result.model.parameters()).shape[1] == 3 and 0 <= result.final_accuracy <= 1
    assert capstone.speed_score(8, "cpu", batch_size=8, steps=2, warmup=1, in_channels=3) > 0
    timings = capstone.time_step_variants(8, "cpu", ["eager"], batch_size=8, steps=2, warmup=1, in_channels=3)
    assert timings[0].variant == "eager"


@pytest.mark.parametrize("call, error", [
    (lambda: capstone.small_cnn(8, in_channels=0), ValueError),
    (lambda: capstone.small_cnn(3), ValueError),
    (lambda: capstone.small_cnn(8.0), TypeError),
    (lambda: capstone.small_cnn(8, channels=16), TypeError),
    (lambda: capstone.small_cnn(8, channels=(16, 0)), ValueError),
    (lambda: capstone.small_cnn(8, num_classes=0), ValueError),
    (lambda: capstone.training_flops_per_image(2), ValueError),
    (lambda: capstone.count_parameters("model"), TypeError),
])
def test_model_functions_reject_bad_arguments(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="Keras is not installed")
def test_keras_twin_has_the_same_parameter_count_and_trains(digits, capfd):
    for size in (8, 28):
        assert capstone.count_parameters(capstone.keras_small_cnn(size)) == capstone.count_parameters(
            capstone.small_cnn(size))
    result = capstone.train_keras(digits.subset(512, 200), epochs=2, batch_size=128, verbose=0)
    assert 0 <= result.accuracy <= 1 and result.train_seconds > 0 and result.images_per_s > 0
    assert result.policy == "float32" and capstone.count_parameters(result.model) == 6090
    assert capfd.readouterr().err == ""  # TensorFlow's start-up lines are silenced
    with pytest.raises(TypeError, match="data"):
        capstone.train_keras("digits")
    with pytest.raises(ValueError, match="precision"):
        capstone.train_keras(digits, precision="float16")


# --------------------------------------------------------------------------- training

def test_a_short_training_run_improves_accuracy_and_measures_itself(digits):
    untrained = capstone.evaluate(capstone.small_cnn(8), digits.test_x, digits.test_y, "cpu")
    result = capstone.train(digits, TrainConfig(epochs=3, batch_size=64, device="cpu"), progress=False)
    assert result.final_accuracy > max(0.6, untrained + 0.3)
    assert [h["epoch"] for h in result.history] == [1, 2, 3]
    assert result.images_seen == 3 * len(digits.train_y)
    seconds = [h["seconds"] for h in result.history]
    assert seconds == sorted(seconds) and result.train_seconds == seconds[-1] > 0
    assert result.images_per_s > 0 and result.time_to_accuracy_s is None
    assert result.precision_used == "float32" and result.device == "cpu"
    assert not result.model.training and "images/s" in result.summary()


def test_training_stops_at_the_target_and_records_when(digits):
    config = TrainConfig(epochs=20, batch_size=64, device="cpu", target_accuracy=0.5, evals_per_epoch=2)
    result = capstone.train(digits, config, progress=False)
    assert result.time_to_accuracy_s is not None and result.best_accuracy >= 0.5
    *before, last = result.history
    assert last["accuracy"] >= 0.5 and all(h["accuracy"] < 0.5 for h in before)  # stopped at the first success
    assert result.time_to_accuracy_s == last["seconds"] and last["epoch"] < 20
    steps_per_epoch = math.ceil(len(digits.train_y) / 64)
    assert [h["step"] for h in result.history] == [  # evaluated twice per epoch: after 12 and 23 of 23 steps
        (i // 2) * steps_per_epoch + (12 if i % 2 == 0 else steps_per_epoch) for i in range(len(result.history))]


def test_every_feed_and_precision_option_trains(digits, capsys):
    small = digits.subset(300, 100)
    for config in (TrainConfig(epochs=1, batch_size=50, feed="loader", device="cpu"),
                   TrainConfig(epochs=1, batch_size=50, precision="mixed", channels_last=True, device="cpu",
                               optimizer="sgd", lr=0.05)):
        result = capstone.train(small, config, progress=True, live_plot=True, warmup_steps=2)
        assert len(result.history) == 1 and 0 <= result.final_accuracy <= 1
        assert result.figure is not None and result.figure.axes[1].lines  # the final static plot
    assert capstone.train(small, TrainConfig(epochs=1, precision="mixed", device="cpu"),
                          progress=False).precision_used == "bfloat16 autocast"
    captured = capsys.readouterr()
    assert "step" in captured.out and captured.err == ""  # the progress bar goes to stdout, never stderr


def test_learning_rate_zero_cannot_reach_the_target(digits):
    result = capstone.train(digits, TrainConfig(epochs=2, lr=0.0, device="cpu", target_accuracy=0.95),
                            progress=False)
    assert result.time_to_accuracy_s is None and result.best_accuracy < 0.5


@pytest.mark.parametrize("kwargs, error", [
    ({"epochs": 0}, ValueError), ({"batch_size": 2.5}, TypeError), ({"lr": -1.0}, ValueError),
    ({"optimizer": "lamb"}, ValueError), ({"device": None}, TypeError), ({"feed": "stream"}, ValueError),
    ({"precision": "int8"}, ValueError), ({"channels_last": 1}, TypeError), ({"target_accuracy": 1.5}, ValueError),
    ({"target_accuracy": "0.9"}, TypeError), ({"num_workers": 2}, ValueError), ({"evals_per_epoch": 0}, ValueError),
    ({"label": 3}, TypeError),
])
def test_train_config_rejects_bad_fields(kwargs, error):
    with pytest.raises(error):
        TrainConfig(**kwargs)


def test_train_and_evaluate_reject_bad_arguments(digits):
    with pytest.raises(TypeError, match="data"):
        capstone.train(digits.train_x)
    with pytest.raises(TypeError, match="config"):
        capstone.train(digits, {"epochs": 1})
    with pytest.raises(TypeError, match="progress"):
        capstone.train(digits, progress="yes")
    with pytest.raises(TypeError, match="model"):
        capstone.evaluate("model", digits.test_x, digits.test_y)
    with pytest.raises(ValueError, match="x must be"):
        capstone.evaluate(capstone.small_cnn(8), digits.test_x[:, 0], digits.test_y)
    with pytest.raises(ValueError, match="prefer"):  # one device picker: gpucourse.hardware.pick_device
        capstone.train(digits, TrainConfig(epochs=1, device="tpu"), progress=False)
    assert not hasattr(capstone, "resolve_device")


def test_evaluate_restores_training_mode(digits):
    model = capstone.small_cnn(8).train()
    accuracy = capstone.evaluate(model, digits.test_x, digits.test_y, batch_size=64)
    assert 0 <= accuracy <= 1 and model.training


def test_autocast_choice_on_the_cpu():
    assert capstone.autocast_dtype("cpu", "float32") == (None, False)
    assert capstone.autocast_dtype("cpu", "mixed") == (torch.bfloat16, False)
    assert capstone.autocast_dtype("cpu", "float16") == (torch.float16, False)
    assert capstone.autocast_dtype(torch.device("cpu"), "bfloat16") == (torch.bfloat16, False)
    with pytest.raises(ValueError, match="precision"):
        capstone.autocast_dtype("cpu", "int8")


@pytest.mark.parametrize("lesson_12_answer, expected", [("bfloat16", (False,)), ("float16", (True,))])
def test_mixed_precision_is_lesson_12s_choice_and_float16_gets_a_scaler(monkeypatch, lesson_12_answer, expected):
    """'mixed' asks gpucourse.precision.autocast_dtype (faked here as on an A100 and on a T4); float16 -> GradScaler."""
    from gpucourse import precision

    asked = []

    def lesson_12(device):
        asked.append(device)
        return getattr(torch, lesson_12_answer)

    monkeypatch.setattr(precision, "autocast_dtype", lesson_12)
    monkeypatch.setattr(capstone.training, "_device", lambda device: torch.device("cuda:0"))  # a GPU, faked
    assert capstone.autocast_dtype("cuda", "mixed") == (getattr(torch, lesson_12_answer), *expected)
    assert asked == [torch.device("cuda:0")]
    assert capstone.autocast_dtype("cuda", "float16") == (torch.float16, True)
    assert capstone.autocast_dtype("cuda", "bfloat16") == (torch.bfloat16, False)


def test_the_capstone_and_lesson_12_agree_here():
    from gpucourse import precision

    device = capstone.training._device("auto")
    assert capstone.autocast_dtype(device, "mixed")[0] == precision.autocast_dtype(device)


@pytest.mark.gpu
def test_autocast_choice_on_a_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    dtype, scaled = capstone.autocast_dtype("cuda", "mixed")
    native = torch.cuda.get_device_capability() >= (8, 0)
    assert (dtype, scaled) == ((torch.bfloat16, False) if native else (torch.float16, True))


# --------------------------------------------------------------------------- budget

def test_speed_score_is_a_positive_rate():
    assert capstone.speed_score(8, "cpu", batch_size=16, steps=3, warmup=1) > 0


def test_time_budget_known_values_and_scaling():
    assert capstone.time_budget_s(60_000, 20_000, slack=4, overhead_s=3) == pytest.approx(3 + 4 * 3)
    slow, fast = capstone.time_budget_s(10_000, 1_000), capstone.time_budget_s(10_000, 2_000)
    assert slow - 3.0 == pytest.approx(2 * (fast - 3.0))  # twice the speed, half the variable budget
    with pytest.raises(ValueError, match="slack"):
        capstone.time_budget_s(100, 10, slack=0.5)
    with pytest.raises(TypeError, match="images"):
        capstone.time_budget_s(100.0, 10)
    with pytest.raises(ValueError, match="images_per_s"):
        capstone.time_budget_s(100, 0)


# --------------------------------------------------------------------------- the race against the first attempt

def test_first_attempt_reaches_the_digits_target_with_the_size_and_channels_it_is_given():
    digits = capstone.load_digits_data()
    model = capstone.first_attempt(digits.train_x, digits.train_y, "cpu", images=6_000)
    assert not model.training and capstone.evaluate(model, digits.test_x, digits.test_y, "cpu") >= 0.95
    colour = np.repeat(np.pad(digits.train_x[:200], ((0, 0), (0, 0), (2, 2), (2, 2))), 3, axis=1)
    model = capstone.first_attempt(colour, digits.train_y[:200], "cpu", images=400)
    assert model(torch.zeros(1, 3, 12, 12)).shape == (1, 10)
    with pytest.raises(ValueError, match="train_x"):
        capstone.first_attempt(digits.train_x[:, 0], digits.train_y)
    with pytest.raises(ValueError, match="train_y"):
        capstone.first_attempt(digits.train_x, digits.train_y[:-1])


def test_race_alternates_the_two_and_divides_the_medians(monkeypatch):
    """Yours first, then the first attempt twice, then yours...: each call timed, the medians divided."""
    seconds = {"yours": [1.0, 3.0, 2.0], "baseline": [10.0, 30.0, 20.0]}
    calls, now = [], [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    x, y = np.zeros((4, 1, 8, 8), np.float32), np.zeros(4, np.int64)

    def runner(side):
        def run(train_x, train_y, device):
            assert train_x.shape == (4, 1, 8, 8) and str(device) == "cpu"
            calls.append(side)
            now[0] += seconds[side][sum(c == side for c in calls) - 1]
            return f"model {len(calls)}"
        return run

    race = capstone.race(runner("yours"), x, y, "cpu", rounds=3, baseline=runner("baseline"))
    assert calls == ["yours", "baseline", "baseline", "yours", "yours", "baseline"]
    assert race.yours_s == [1.0, 3.0, 2.0] and race.baseline_s == [10.0, 30.0, 20.0]
    assert race.speedup == pytest.approx(10.0) and race.model == "model 5"
    assert "speed-up 10.00x" in race.summary()
    calls.clear()
    seconds = {"yours": [1.0, 3.0], "baseline": [10.0, 2.0]}
    race = capstone.race(runner("yours"), x, y, "cpu", baseline=runner("baseline"), thresholds=[2.0, 1.5])
    assert calls == ["yours", "baseline"] and race.speedup == pytest.approx(10.0)  # far from both: one round
    calls.clear()
    seconds = {"yours": [1.0, 3.0, 1.0], "baseline": [3.5, 2.0, 2.0]}
    race = capstone.race(runner("yours"), x, y, "cpu", baseline=runner("baseline"), thresholds=[2.0, 1.5])
    assert calls == ["yours", "baseline", "baseline", "yours", "yours", "baseline"]  # 3.5x is not 2x clear of 2
    assert race.speedup == pytest.approx(2.0)  # a real median of three: 2.0 / 1.0, not the mean of two
    calls.clear()

    def judge(model):
        raise AssertionError(f"{model} is wrong")

    with pytest.raises(AssertionError, match="model 1 is wrong"):  # judged before the first attempt runs
        capstone.race(runner("yours"), x, y, "cpu", baseline=runner("baseline"), judge=judge)
    assert calls == ["yours"]
    with pytest.raises(TypeError, match="judge"):
        capstone.race(runner("yours"), x, y, "cpu", judge="strict")
    with pytest.raises(TypeError, match="train_fn"):
        capstone.race("not a function", x, y, "cpu")
    with pytest.raises(ValueError, match="rounds"):
        capstone.race(runner("yours"), x, y, "cpu", rounds=0)


def test_race_hands_each_call_a_fresh_copy_and_stops_on_a_cache_or_a_thread_left_running():
    import threading

    x = np.arange(6 * 16, dtype=np.float32).reshape(6, 1, 4, 4) / 96
    y = np.array([0, 0, 0, 1, 1, 1])  # sorted by class: the copies keep the order of the labels
    seen = []

    def record(train_x, train_y, device):
        seen.append((train_x, train_y))
        return torch.nn.Linear(1, 1)

    race = capstone.race(record, x, y, "cpu", baseline=record)
    assert race.spoiled is None and len(race.yours_s) == len(race.baseline_s) == 3
    assert all(a is not x for a, _ in seen) and all(list(b) == list(y) for _, b in seen)
    assert len({a.tobytes() for a, _ in seen}) > 1  # the images of a class come in another order
    assert all(sorted(map(bytes, a.reshape(6, -1))) == sorted(map(bytes, x.reshape(6, -1))) for a, _ in seen)
    cached = torch.nn.Linear(1, 1)
    race = capstone.race(lambda *args: cached, x, y, "cpu", baseline=record)
    assert "returned before" in race.spoiled and len(race.yours_s) == 2
    torch.manual_seed(0)
    weights = torch.nn.Linear(1, 1).state_dict()

    def reloaded(*args):
        model = torch.nn.Linear(1, 1)
        model.load_state_dict(weights)
        return model

    assert "very weights" in capstone.race(reloaded, x, y, "cpu", baseline=record).spoiled
    stop = threading.Event()

    def leaves_a_thread(*args):
        threading.Thread(target=stop.wait, name="spinner", daemon=True).start()
        return torch.nn.Linear(1, 1)

    monkey = capstone.training.THREAD_GRACE_S
    try:
        capstone.training.THREAD_GRACE_S = 0.05
        race = capstone.race(leaves_a_thread, x, y, "cpu", baseline=record)
    finally:
        capstone.training.THREAD_GRACE_S = monkey
        stop.set()
    assert "1 thread(s) running" in race.spoiled and "spinner" in race.spoiled and race.baseline_s == []

    def short_thread(*args):
        threading.Thread(target=time.sleep, args=(0.01,)).start()  # ends within the grace: not left running
        return torch.nn.Linear(1, 1)

    assert capstone.race(short_thread, x, y, "cpu", baseline=record, rounds=1).spoiled is None


# --------------------------------------------------------------------------- reports and plots

def _result(label: str, images_per_s: float, tta: float | None) -> capstone.TrainResult:
    return capstone.TrainResult(TrainConfig(label=label), "cpu", "digits", "float32", images_per_s=images_per_s,
                                time_to_accuracy_s=tta)


def test_speedup_rows_are_relative_to_the_first_run():
    rows = capstone.speedup_rows([_result("base", 1000, 10.0), _result("fast", 4000, 2.5), _result("miss", 500, None)])
    assert [r["throughput_speedup"] for r in rows] == [1.0, 4.0, 0.5]
    assert [r["tta_speedup"] for r in rows] == [1.0, 4.0, None]
    ax = capstone.plot_speedups(rows)
    assert len(ax.patches) == 6 and [t.get_text() for t in ax.get_xticklabels()] == ["base", "fast", "miss"]
    with pytest.raises(ValueError):
        capstone.speedup_rows([])
    with pytest.raises(TypeError):
        capstone.speedup_rows([{"images_per_s": 1}])
    with pytest.raises(ValueError):
        capstone.plot_speedups([{"technique": "x"}])


def test_markdown_table():
    assert capstone.markdown_table(["a", "b"], [[1, 2]]) == "| a | b |\n| --- | --- |\n| 1 | 2 |"
    with pytest.raises(ValueError, match="row"):
        capstone.markdown_table(["a", "b"], [[1]])


def test_live_plot_outside_jupyter_draws_once_at_the_end():
    plot = capstone.LivePlot(target=0.9, title="t")
    history = [{"seconds": 0.5, "loss": 1.0, "accuracy": 0.5}, {"seconds": 1.0, "loss": 0.5, "accuracy": 0.92}]
    plot.update(history)
    assert not plot.acc_ax.lines  # nothing drawn yet: no notebook to show it in
    plot.close()
    assert len(plot.acc_ax.lines) == 2 and plot.handle is None  # accuracy curve and target line
    with pytest.raises(ValueError):
        capstone.LivePlot(target=-0.5)


# --------------------------------------------------------------------------- cost

def test_cost_known_values():
    assert capstone.cloud_cost_per_run(2.0, 3.0) == pytest.approx(6.0)
    # 8,760 USD over one year fully used is 1 USD/h; 0.5 kW at 0.2 USD/kWh adds 0.1 USD/h
    assert capstone.on_prem_usd_per_hour(8760, 1, 1.0, 0.5, 0.2) == pytest.approx(1.1)
    assert capstone.on_prem_cost_per_run(10, 8760, 1, 0.5, 0.5, 0.2) == pytest.approx(10 * 2.1)
    assert capstone.break_even_hours(1.1, 1000, 0.5, 0.2) == pytest.approx(1000.0)
    assert capstone.break_even_hours(0.1, 1000, 0.5, 0.2) == math.inf
    comparison = capstone.compare_costs(4.0, 1.1, 1000, lifetime_years=1, utilisation=0.1, power_kw=0.5,
                                        usd_per_kwh=0.2)
    assert comparison.break_even_runs == pytest.approx(250.0) and comparison.lifetime_hours_used == pytest.approx(876)
    assert not comparison.pays_off_within_lifetime and "renting is cheaper" in comparison.summary()
    ax = capstone.plot_costs(comparison, 1.1, 1000, 0.5, 0.2)
    assert len(ax.lines) == 4
    never = capstone.compare_costs(1.0, 0.05, 1000)
    assert "never" in never.summary() and not never.pays_off_within_lifetime


@PROPERTY
@given(rate=st.floats(0.2, 50), purchase=st.floats(100, 1e6), power=st.floats(0.01, 1.5), price=st.floats(0.01, 0.1))
def test_at_break_even_both_ways_cost_the_same(rate, purchase, power, price):
    hours = capstone.break_even_hours(rate, purchase, power, price)
    assert math.isfinite(hours) and hours > 0
    assert purchase + power * price * hours == pytest.approx(rate * hours, rel=1e-9)


@pytest.mark.parametrize("bad, error", BAD_NUMBERS)
def test_cost_functions_reject_bad_numbers(bad, error):
    with pytest.raises(error, match="run_hours"):
        capstone.cloud_cost_per_run(bad, 1.0)
    with pytest.raises(error, match="purchase_usd"):
        capstone.break_even_hours(1.0, bad, 0.3, 0.2)


def test_utilisation_must_be_a_fraction():
    with pytest.raises(ValueError, match="utilisation"):
        capstone.on_prem_usd_per_hour(1000, 3, 1.5, 0.3, 0.2)
    with pytest.raises(ValueError, match="utilisation"):
        capstone.compare_costs(1.0, 1.0, 1000, utilisation=0)
    with pytest.raises(TypeError, match="comparison"):
        capstone.plot_costs("cheap", 1.0, 1000, 0.3, 0.2)


def test_show_table_prints_markdown_outside_jupyter(capsys):
    capstone.show_table(["a", "b"], [[1, 2], ["x", "y"]])
    assert capsys.readouterr().out.splitlines() == ["| a | b |", "| --- | --- |", "| 1 | 2 |", "| x | y |"]


def test_show_speedups_and_plot_examples_draw(digits, capsys):
    rows = [{"technique": "base", "images_per_s": 100.0, "throughput_speedup": 1.0, "time_to_accuracy_s": 2.0,
             "tta_speedup": 1.0},
            {"technique": "fast", "images_per_s": 300.0, "throughput_speedup": 3.0, "time_to_accuracy_s": None,
             "tta_speedup": None}]
    capstone.show_speedups(rows, 0.9, title="t")
    text = capsys.readouterr().out
    assert "time to 90%" in text and "3.00x" in text and "not reached" in text
    capstone.plot_examples(digits, count=4)
    with pytest.raises(ValueError, match="rows"):
        capstone.show_speedups([{"technique": "x"}])
    with pytest.raises(TypeError, match="data"):
        capstone.plot_examples("digits")


def test_live_plot_start_outside_jupyter_shows_nothing():
    plot = capstone.LivePlot(target=0.9)
    plot.start()
    assert plot.handle is None


# --------------------------------------------------------------------------- step switches

def test_compile_backend_falls_back_to_aot_eager_when_inductor_fails(monkeypatch):
    def broken_compile(*args, **kwargs):
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", broken_compile)
    assert capstone.compile_backend() == ("aot_eager", "RuntimeError: InvalidCxxCompiler: No working C++ compiler found")


def test_step_variants_time_eager_and_compiled_steps_on_the_cpu():
    timings = capstone.time_step_variants(8, "cpu", ["eager", "torch.compile"], batch_size=16, steps=3, warmup=1,
                                          backend="aot_eager")
    assert [(t.variant, t.backend) for t in timings] == [("eager", "eager"), ("torch.compile", "aot_eager")]
    assert all(t.first_call_s > 0 and t.median_step_s > 0 for t in timings)
    with pytest.raises(ValueError, match="CUDA GPU only"):
        capstone.time_step_variants(8, "cpu", ["eager", "cudnn.benchmark"])
    with pytest.raises(ValueError, match="variants"):
        capstone.time_step_variants(8, "cpu", ["eager", "xla"])
    with pytest.raises(TypeError, match="variants"):
        capstone.time_step_variants(8, "cpu", "eager")


def test_payback_steps_and_the_step_table(capsys):
    eager = capstone.StepTiming("eager", "eager", first_call_s=0.02, median_step_s=0.01)
    compiled = capstone.StepTiming("torch.compile", "inductor", first_call_s=10.012, median_step_s=0.006)
    slower = capstone.StepTiming("torch.compile", "inductor", first_call_s=5.0, median_step_s=0.02)
    assert capstone.payback_steps(compiled, eager) == pytest.approx((10.006 - 0.01) / 0.004)
    assert capstone.payback_steps(slower, eager) == math.inf
    capstone.show_step_timings([eager, compiled, slower], run_steps=1000)
    text = capsys.readouterr().out
    assert "2,499" in text and "never" in text and "| no |" in text
    capstone.show_step_timings([eager, compiled], run_steps=5000)
    assert "| yes |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="eager"):
        capstone.show_step_timings([compiled])
    with pytest.raises(TypeError, match="StepTiming"):
        capstone.payback_steps("fast", eager)


def test_cudnn_benchmark_is_a_recipe_switch_restored_after_the_run(digits):
    before = torch.backends.cudnn.benchmark
    result = capstone.train(digits, TrainConfig(epochs=1, batch_size=256, cudnn_benchmark=not before), progress=False)
    assert result.images_seen > 0 and torch.backends.cudnn.benchmark == before
    with pytest.raises(TypeError, match="cudnn_benchmark"):
        TrainConfig(cudnn_benchmark="yes")


def test_every_name_of_the_single_module_is_still_importable_from_the_package():
    """The split into capstone/ kept gpucourse.capstone's public names (resolve_device gave way to pick_device)."""
    before_the_split = [
        "DATASETS", "IDX_FILES", "ImageData", "load_data", "load_digits_data", "download_dataset", "read_idx",
        "fetch_url", "data_dir", "network_available", "import_keras", "small_cnn", "keras_small_cnn",
        "count_parameters", "training_flops_per_image", "TrainConfig", "TrainResult", "autocast_dtype",
        "OnTheFlyImages", "evaluate", "train", "speed_score", "time_budget_s", "LivePlot", "speedup_rows",
        "plot_speedups", "markdown_table", "show_table", "show_speedups", "plot_examples", "KerasResult", "train_keras",
        "cloud_cost_per_run", "on_prem_usd_per_hour", "on_prem_cost_per_run", "break_even_hours", "CostComparison",
        "compare_costs", "plot_costs", "HOURS_PER_YEAR", "OFFLINE_VARIABLE", "DATA_DIR_VARIABLE", "PRECISIONS"]
    assert [name for name in before_the_split if not hasattr(capstone, name)] == []
    assert set(capstone.__all__) <= set(dir(capstone))


@pytest.mark.gpu
def test_step_variants_on_a_cuda_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    before = torch.backends.cudnn.benchmark
    timings = capstone.time_step_variants(28, "cuda", list(capstone.step_switches.VARIANTS), steps=5)
    assert [t.variant for t in timings] == list(capstone.step_switches.VARIANTS)
    assert all(t.median_step_s > 0 for t in timings)
    assert torch.backends.cudnn.benchmark == before


# --------------------------------------------------------------------------- track B: the learner's DDP script

TINY_DDP = '''
"""A tiny DDP script for the test (not the lesson's answer): small_cnn, cross-entropy, shuffled sampler."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from gpucourse import capstone

parser = argparse.ArgumentParser()
for name in ("--data", "--out"):
    parser.add_argument(name, required=True)
parser.add_argument("--batch-per-rank", type=int, required=True)
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--passes", type=int, required=True)
args = parser.parse_args()
dist.init_process_group("gloo")
torch.manual_seed(0)
data = torch.load(args.data)
dataset = TensorDataset(data["x"], data["y"])
sampler = DistributedSampler(dataset, shuffle=True, seed=0)
loader = DataLoader(dataset, batch_size=args.batch_per_rank, sampler=sampler)
model = DistributedDataParallel(capstone.small_cnn(data["x"].shape[-1], in_channels=data["x"].shape[1]))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for epoch in range(args.passes):
    sampler.set_epoch(epoch)
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
if dist.get_rank() == 0:
    torch.save(model.module.state_dict(), args.out)
dist.barrier()
dist.destroy_process_group()
'''


def _processes_running(script) -> list:
    """The processes whose command line names ``script`` (a torchrun or one of its ranks)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(str(script) in part for part in process.info["cmdline"] or []):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture(scope="module")
def digits():
    """The shipped 8x8 digits."""
    return capstone.load_digits_data()


def test_train_with_torchrun_trains_small_cnn_on_two_gloo_processes_and_leaves_no_process(tmp_path, digits):
    script = tmp_path / "tiny_ddp.py"
    script.write_text(TINY_DDP)
    job = capstone.train_with_torchrun(script, digits, procs=2, batch_per_rank=32, lr=1e-2, passes=6, timeout_s=120)
    assert job.failure == "", job.output[-3000:]
    assert job.codes == [0]
    assert job.accuracy > 0.5, job.summary()  # chance is 10%
    assert 0 < job.seconds < 120
    assert "2 processes under torchrun" in job.summary()
    assert not _processes_running(script)


def test_train_with_torchrun_reports_a_failing_rank_and_a_stuck_job_without_leaving_processes(tmp_path, digits):
    failing = tmp_path / "failing.py"
    failing.write_text("import os\nif os.environ['RANK'] == '1':\n    raise ValueError('rank 1 broke')\n")
    job = capstone.train_with_torchrun(failing, digits, timeout_s=60)
    assert job.codes != [0] and job.accuracy is None
    assert "ValueError: rank 1 broke" in job.failure, job.failure
    assert not _processes_running(failing)
    silent = tmp_path / "silent.py"
    silent.write_text("print('done, saved nothing')\n")
    job = capstone.train_with_torchrun(silent, digits, timeout_s=60)
    assert job.codes == [0] and "saved nothing to --out" in job.failure
    stuck = tmp_path / "stuck.py"
    stuck.write_text("import time\nwhile True:\n    sum(range(10_000))\n    time.sleep(0.01)\n")
    started = time.monotonic()
    job = capstone.train_with_torchrun(stuck, digits, timeout_s=4)
    assert time.monotonic() - started < 30
    assert "still running after the time limit" in job.failure and job.accuracy is None
    assert not _processes_running(stuck)


def test_train_with_torchrun_says_when_the_weights_are_not_small_cnns(tmp_path, digits):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import sys, torch\nout = sys.argv[sys.argv.index('--out') + 1]\n"
                     "import os\nif os.environ['RANK'] == '0':\n    torch.save({'w': torch.zeros(3)}, out)\n")
    job = capstone.train_with_torchrun(wrong, digits, procs=1, timeout_s=60)
    assert job.codes == [0] and job.accuracy is None
    assert "do not load into capstone.small_cnn(8, in_channels=1)" in job.failure, job.failure


@pytest.mark.parametrize("argument, value, error", [
    ("procs", 0, ValueError), ("procs", 1.5, TypeError), ("batch_per_rank", -1, ValueError),
    ("lr", float("nan"), ValueError), ("lr", "0.1", TypeError), ("passes", 0, ValueError),
    ("timeout_s", 0, ValueError)])
def test_train_with_torchrun_names_a_bad_argument(tmp_path, digits, argument, value, error):
    script = tmp_path / "any.py"
    script.write_text("")
    with pytest.raises(error, match=argument):
        capstone.train_with_torchrun(script, digits, **{argument: value})


def test_train_with_torchrun_rejects_a_missing_script_and_data_that_is_not_imagedata(tmp_path, digits):
    with pytest.raises(FileNotFoundError, match="capstone_ddp.py"):
        capstone.train_with_torchrun(tmp_path / "capstone_ddp.py", digits)
    with pytest.raises(TypeError, match="script"):
        capstone.train_with_torchrun(3, digits)
    script = tmp_path / "any.py"
    script.write_text("")
    with pytest.raises(TypeError, match="data must be an ImageData"):
        capstone.train_with_torchrun(script, {"x": np.zeros((2, 1, 8, 8))})
