"""effpt.data at the edges of issue 26: huge declared sizes, links, paths, names, zeros.

Every test builds the real thing: a tar header whose size field was rewritten, a
symbolic link on disk, the same shard named two ways, members that share a name.
"""

from __future__ import annotations

import io
import signal
import tarfile
import warnings
from contextlib import contextmanager

import numpy as np
import pytest

from effpt import data

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


class Overdue(Exception):
    """The block ran past its deadline."""


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the test run) if the block takes longer than ``seconds``."""

    def expire(_signum, _frame):
        msg = f"still running after {seconds} s"
        raise Overdue(msg)

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return data.write_image_folder(tmp_path_factory.mktemp("images"), 4, size=8)


@pytest.fixture(scope="module")
def shard(images, tmp_path_factory):
    [path] = data.write_tar_shards(images, tmp_path_factory.mktemp("shard"), 1)
    return path


def with_declared_size(raw: bytes, size: int) -> bytes:
    """The shard with its first member's header declaring ``size`` bytes (GNU base-256)."""
    header = bytearray(raw[:512])
    header[124:136] = b"\x80" + size.to_bytes(11, "big")
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header) + raw[512:]


# -- 1. a huge declared size is an error in every worker, at once -----------------------
@pytest.mark.parametrize("size", [2**38, 2**80])
@pytest.mark.parametrize("offset", [0, 1])
def test_a_huge_declared_size_fails_at_once_in_every_worker(shard, images, tmp_path, size, offset):
    path = tmp_path / "huge.tar"
    path.write_bytes(with_declared_size(shard.read_bytes(), size))
    first = f"{images[0].parent.name}/{images[0].name}"
    with deadline(5), pytest.raises(data.CorruptItemError) as caught:
        list(data.iter_members(path, stride=2, offset=offset))  # offset 1 skips member 0
    assert "huge.tar" in str(caught.value)
    assert first in str(caught.value)
    assert f"declares {size} bytes" in str(caught.value)


def test_a_huge_declared_size_is_skipped_with_skip_bad_in_every_worker(shard, tmp_path):
    path = tmp_path / "huge.tar"
    path.write_bytes(with_declared_size(shard.read_bytes(), 2**80))
    stream = data.ShardStream([path], skip_bad=True)
    with deadline(5), warnings.catch_warnings():
        warnings.simplefilter("ignore", data.SkippedItemsWarning)
        for worker in range(2):
            assert list(stream.iter_worker(worker, 2)) == []
    assert [s.member for s in stream.skipped()] == [None]


# -- 2. a symbolic link keeps the label of the folder it sits in -------------------------
def test_a_symlinked_image_keeps_the_label_of_its_own_folder(images, tmp_path):
    store = tmp_path / "store" / "triangle"
    store.mkdir(parents=True)
    target = store / "0.png"
    target.write_bytes(images[0].read_bytes())
    link = tmp_path / "ds" / "square" / "x.png"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    [out] = data.write_tar_shards([link], tmp_path / "out", 1)
    [(name, payload)] = list(data.iter_members(out))
    assert name == "square/x.png"
    assert payload == images[0].read_bytes()  # the link's target's bytes, as a regular file
    [(_, label, key)] = list(data.ShardStream([out]))
    assert (data.SHAPES[label], key) == ("square", "square/x")


# -- 3. a dangling link is named, not dropped ------------------------------------------------
def test_a_dangling_symlink_in_an_image_folder_is_named(images, tmp_path):
    folder = tmp_path / "ds" / "square"
    folder.mkdir(parents=True)
    (folder / "a.png").write_bytes(images[0].read_bytes())
    (folder / "b.png").symlink_to(tmp_path / "gone.png")
    with pytest.raises(FileNotFoundError, match=r"b\.png' is a link to '.*gone\.png'"):
        data.ImageFolder(tmp_path / "ds")


# -- 4. the same shard named two ways is listed twice ------------------------------------------
@pytest.mark.parametrize("how", ["relative", "dotdot", "symlink"])
def test_the_same_shard_under_two_names_is_listed_twice(shard, tmp_path, monkeypatch, how):
    monkeypatch.chdir(shard.parent)
    if how == "relative":
        other = shard.name
    elif how == "dotdot":
        other = str(shard.parent / ".." / shard.parent.name / shard.name)
    else:
        other = tmp_path / "alias.tar"
        other.symlink_to(shard)
    with pytest.raises(ValueError, match=r"listed twice.*would arrive twice"):
        data.ShardStream([shard, other])


# -- minor: skipped() lists every bad member, even when they share a name ------------------------
def test_bad_members_that_share_a_name_are_all_listed(tmp_path):
    path = tmp_path / "same.tar"
    with tarfile.open(path, "w") as tar:
        for _ in range(3):
            info = tarfile.TarInfo("square/bad.png")
            info.size = 4
            tar.addfile(info, io.BytesIO(b"oops"))
    stream = data.ShardStream([path], skip_bad=True)
    with pytest.warns(data.SkippedItemsWarning, match="skipped 3 bad item"):
        assert list(stream) == []
    assert [s.member for s in stream.skipped()] == ["square/bad.png"] * 3
    with pytest.warns(data.SkippedItemsWarning):
        list(stream)  # a second pass of the same epoch skips the same items
    assert len(stream.skipped()) == 3


# -- minor: the 16-bit refusal keeps its words on every path ---------------------------------
@pytest.mark.parametrize("fmt", ["PNG", "TIFF"])
def test_a_16_bit_image_is_refused_as_such(fmt):
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4), 40000, np.uint16)).save(buffer, fmt)
    with pytest.raises(data.CorruptItemError) as caught:
        data.decode_image(buffer.getvalue(), where="deep.png")
    assert str(caught.value).startswith("deep.png: a I;16")
    assert "not a readable image" not in str(caught.value)


# -- minor: write_tar_shards given one path, not a list ----------------------------------------
def test_write_tar_shards_refuses_a_single_path(images, tmp_path):
    for single in (str(images[0]), images[0]):
        with pytest.raises(TypeError, match=r"paths must be a list of files, got the single path"):
            data.write_tar_shards(single, tmp_path, 1)


# -- decided: a shard of zero bytes only ---------------------------------------------------------
@pytest.mark.parametrize("blocks", [0, 2, 20])
def test_a_shard_of_zero_bytes_only_is_an_error(tmp_path, blocks):
    path = tmp_path / "zeros.tar"
    path.write_bytes(b"\0" * 512 * blocks)
    with pytest.raises(data.CorruptItemError, match=r"zeros\.tar' (holds no member|is truncated)"):
        list(data.iter_members(path))
    stream = data.ShardStream([path], skip_bad=True)
    with pytest.warns(data.SkippedItemsWarning, match="skipped 1 bad item"):
        assert list(stream) == []
