"""effpt.data against damaged files and edge arguments: nothing is lost without a word.

Every test here builds a real damaged file (a shard cut short, a header overwritten, a
member that is not an image, an image over Pillow's size limit) and checks that the
damage is either reported as an error that names the shard and member, or skipped and
counted where the consumer of the loader can read the count.
"""

from __future__ import annotations

import io
import multiprocessing
import tarfile
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from effpt import data

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

N = 6  # members of the test shard


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return data.write_image_folder(tmp_path_factory.mktemp("images"), N, size=8)


@pytest.fixture(scope="module")
def shard(images, tmp_path_factory):
    [path] = data.write_tar_shards(images, tmp_path_factory.mktemp("shard"), 1)
    return path


@pytest.fixture(scope="module")
def members(shard):
    with tarfile.open(shard) as tar:
        return tar.getmembers()


def keys_of(images):
    return [f"{p.parent.name}/{p.stem}" for p in images]


def read_all(path, **kwargs):
    return [key for _, _, key in data.ShardStream([path], **kwargs)]


def damaged(tmp_path, raw: bytes, name="damaged.tar"):
    path = tmp_path / name
    path.write_bytes(raw)
    return path


# -- 1. a shard that stops early is an error ------------------------------------------


@pytest.mark.parametrize("k", range(1, N + 1))
def test_cut_at_a_block_boundary_names_the_last_good_member(shard, members, tmp_path, k):
    """Cut where member k's header would start: tarfile alone takes that for the end."""
    end = members[k].offset if k < N else members[-1].offset_data + 512  # k == N: no marker
    cut = damaged(tmp_path, shard.read_bytes()[:end], "cut.tar")
    last = members[k - 1].name
    with pytest.raises(data.CorruptItemError, match=rf"cut\.tar'.* after member '{last}'"):
        read_all(cut)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b, at: b.__setitem__(at + 148, b[at + 148] ^ 1), id="checksum"),
        pytest.param(lambda b, at: b.__setitem__(slice(at, at + 512), bytes(512)), id="zeroed"),
        pytest.param(
            lambda b, at: b.__setitem__(slice(at, at + 512), np.random.default_rng(0).bytes(512)),
            id="garbage",
        ),
    ],
)
def test_damaged_header_in_the_middle(shard, members, tmp_path, damage, images):
    raw = bytearray(shard.read_bytes())
    damage(raw, members[3].offset)
    path = damaged(tmp_path, bytes(raw))
    with pytest.raises(data.CorruptItemError, match=rf"after member '{members[2].name}'"):
        read_all(path)
    stream = data.ShardStream([path], skip_bad=True)
    with pytest.warns(data.SkippedItemsWarning, match="skipped 1 bad item"):
        keys = [key for _, _, key in stream]
    assert keys == keys_of(images)[:3]
    [skip] = stream.skipped()
    assert (skip.shard, skip.member) == (str(path), None)
    assert f"after member '{members[2].name}'" in skip.message


def test_a_lone_zero_block_is_not_an_end_of_archive_marker(shard, members, tmp_path):
    end = members[-1].offset_data + 512
    path = damaged(tmp_path, shard.read_bytes()[:end] + bytes(512))
    with pytest.raises(data.CorruptItemError, match="end-of-archive marker"):
        read_all(path)
    whole = damaged(tmp_path, shard.read_bytes()[:end] + bytes(1024), "whole.tar")
    assert len(read_all(whole)) == N


# -- 2. writers leave no shard that passes for complete ------------------------------


def test_long_and_accented_member_names_round_trip(tmp_path):
    [image] = data.write_image_folder(tmp_path / "images", 1, size=8)
    long = image.with_name("é" * 60 + ".png")  # 122 bytes in UTF-8: over ustar's 100
    image.rename(long)
    [path] = data.write_tar_shards([long], tmp_path / "shards", 1)
    assert read_all(path) == [f"{long.parent.name}/{long.stem}"]


def test_a_failed_write_leaves_no_shard(images, tmp_path, monkeypatch):
    calls = []
    add = tarfile.TarFile.add

    def failing_add(self, name, *args, **kwargs):
        calls.append(name)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        return add(self, name, *args, **kwargs)

    monkeypatch.setattr(tarfile.TarFile, "add", failing_add)
    out = tmp_path / "shards"
    with pytest.raises(OSError, match=rf"cannot pack '.*{images[2].name}' into .*shard-000\.tar"):
        data.write_tar_shards(images, out, 1)
    assert list(out.iterdir()) == []


def test_writer_rejects_what_it_cannot_pack(images, tmp_path):
    with pytest.raises(ValueError, match="shards=7 but only 6 paths"):
        data.write_tar_shards(images, tmp_path, 7)
    with pytest.raises(FileNotFoundError, match=r"'.*missing\.png' is not a file"):
        data.write_tar_shards([*images[:1], tmp_path / "circle" / "missing.png"], tmp_path, 1)
    with pytest.raises(ValueError, match="paths must list at least one file"):
        data.write_tar_shards([], tmp_path, 1)
    twin = tmp_path / "elsewhere" / images[0].parent.name / images[0].name
    twin.parent.mkdir(parents=True)
    twin.write_bytes(images[0].read_bytes())
    with pytest.raises(ValueError, match="both become member"):
        data.write_tar_shards([images[0], twin], tmp_path / "out", 1)


# -- 3. a transform's error is the transform's ------------------------------------------


class FailOn:
    """A transform that raises ``exc`` on its ``n``-th call (importable by workers)."""

    def __init__(self, n, exc):
        self.n, self.exc, self.calls = n, exc, 0

    def __call__(self, image):
        self.calls += 1
        if self.calls == self.n:
            raise self.exc
        return image


@pytest.mark.parametrize("skip_bad", [False, True])
def test_transform_error_names_the_member_and_is_not_skipped(shard, members, skip_bad):
    stream = data.ShardStream([shard], transform=FailOn(2, OSError("disk full")), skip_bad=skip_bad)
    pattern = rf"member '{members[1].name}': the transform raised OSError: disk full"
    with pytest.raises(data.TransformError, match=pattern) as info:
        list(stream)
    assert isinstance(info.value.__cause__, OSError)
    assert "truncated" not in str(info.value)


def test_image_folder_transform_error_names_the_file(images):
    folder = data.ImageFolder(images[0].parent.parent, transform=FailOn(1, ValueError("odd")))
    with pytest.raises(data.TransformError, match=r"\.png: the transform raised ValueError: odd"):
        folder[0]


# -- 4. decompression bombs are bad items ----------------------------------------------


def test_an_image_over_pillows_limit_is_a_named_bad_item(shard, members, monkeypatch):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 16)  # 8 × 8 = 64 > 2 × 16: an error
    with pytest.raises(data.CorruptItemError, match=rf"member '{members[0].name}'.*limit"):
        list(data.ShardStream([shard]))
    stream = data.ShardStream([shard], skip_bad=True)
    with pytest.warns(data.SkippedItemsWarning, match=f"skipped {N} bad item"):
        assert list(stream) == []
    assert [s.member for s in stream.skipped()] == [m.name for m in members]


def test_pillows_size_warning_names_the_member(shard, members, monkeypatch):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 40)  # 40 < 64 <= 80: Pillow warns
    with pytest.warns(Image.DecompressionBombWarning) as caught:
        assert len(read_all(shard)) == N
    assert [str(w.message).split("'")[3] for w in caught] == [m.name for m in members]


# -- 5. folders, directories and crops ---------------------------------------------------


def test_image_folder_ignores_a_folder_named_like_an_image(images):
    root = images[0].parent.parent
    (images[0].parent / "x.png").mkdir()
    try:
        folder = data.ImageFolder(root)
        assert len(folder) == N
        assert all(not path.endswith("x.png") for path, _ in folder.samples)
    finally:
        (images[0].parent / "x.png").rmdir()


def test_a_directory_is_not_a_shard(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"shard '.*' is a directory, not a tar file"):
        data.ShardStream([tmp_path])


def test_a_crop_larger_than_the_image_names_both_sizes():
    base = [(torch.zeros(3, 8, 6, dtype=torch.uint8), 0)]
    crops = data.RandomCrops(base, 7, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"crop size 7 does not fit item 0's image of 8 × 6"):
        crops[0]


# -- 6. skips reach the loop that consumes the loader -----------------------------------


def not_an_image(tmp_path, shard):
    """A copy of ``shard`` whose member 1 holds bytes that are not an image."""
    bad = tmp_path / "bad.tar"
    with tarfile.open(shard) as good, tarfile.open(bad, "w", format=tarfile.PAX_FORMAT) as tar:
        for k, member in enumerate(good):
            payload = good.extractfile(member).read()
            if k == 1:
                payload = b"not an image"
                member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))
    return bad


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_skips_in_worker_processes_reach_the_main_process(shard, members, tmp_path, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method!r} is not available here")
    bad = not_an_image(tmp_path, shard)
    stream = data.ShardStream([bad, shard], skip_bad=True)
    loader = DataLoader(stream, batch_size=2, num_workers=2, multiprocessing_context=method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", data.SkippedItemsWarning)  # a fork worker inherits "error"
        keys = [key for _, _, batch in loader for key in batch]
    assert len(keys) == 2 * N - 1
    [skip] = stream.skipped()
    assert (skip.shard, skip.member, skip.epoch) == (str(bad), members[1].name, 0)
    assert "not a readable image" in skip.message


# -- 7. epochs and seeds -------------------------------------------------------------------


def test_set_epoch_reshuffles_and_each_epoch_is_exactly_once(images, tmp_path):
    shards = data.write_tar_shards(images, tmp_path, 3)
    stream = data.ShardStream(shards, shuffle=True, seed=0, buffer_size=4)
    orders = []
    for epoch in (0, 1, 0):
        stream.set_epoch(epoch)
        orders.append([k for w in range(2) for _, _, k in stream.iter_worker(w, 2)])
    assert orders[0] != orders[1]
    assert orders[0] == orders[2]
    assert all(sorted(order) == sorted(keys_of(images)) for order in orders)


def test_set_epoch_reaches_persistent_workers(images, tmp_path):
    shards = data.write_tar_shards(images, tmp_path, 3)
    stream = data.ShardStream(shards, shuffle=True, seed=0, buffer_size=4)
    loader = DataLoader(stream, batch_size=1, num_workers=2, persistent_workers=True)
    orders = []
    for epoch in (0, 1):
        stream.set_epoch(epoch)
        orders.append([k for _, _, (k,) in loader])
    del loader
    assert orders[0] != orders[1]
    assert all(sorted(order) == sorted(keys_of(images)) for order in orders)


def test_worker_streams_do_not_collide():
    """seed + worker would give seed 0 / worker 1 the stream of seed 1 / worker 0."""
    draws = {
        (seed, epoch, worker): tuple(data.worker_rng(seed, epoch, worker).integers(2**62, size=4))
        for seed in range(4)
        for epoch in range(3)
        for worker in range(4)
    }
    assert len(set(draws.values())) == len(draws)


def test_epoch_and_seed_are_checked(shard):
    with pytest.raises(ValueError, match="epoch must be >= 0, got -1"):
        data.ShardStream([shard]).set_epoch(-1)
    with pytest.raises(ValueError, match="seed must be >= 0, got -3"):
        data.ShardStream([shard], seed=-3)


# -- 8. probes: every truncation, every header byte and field ----------------------------


def names_until_error(path):
    """The member names read from ``path`` before an error, and whether one was raised."""
    names = []
    try:
        for name, _ in data.iter_members(path):
            names.append(name)
    except data.CorruptItemError:
        return names, True
    return names, False


def test_truncation_at_every_offset_is_reported(shard, members, tmp_path):
    raw = shard.read_bytes()
    full = [m.name for m in members]
    complete = members[-1].offset_data + 512 + 1024  # data block, then the two zero blocks
    path = tmp_path / "cut.tar"
    for cut in range(len(raw)):
        path.write_bytes(raw[:cut])
        names, raised = names_until_error(path)
        assert names == full[: len(names)], cut
        assert raised == (cut < complete), (cut, names)


@pytest.mark.parametrize("cut_block", range(14))
def test_truncated_stream_with_skip_bad_reports_the_loss(shard, tmp_path, cut_block):
    path = damaged(tmp_path, shard.read_bytes()[: cut_block * 512])
    stream = data.ShardStream([path], skip_bad=True)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        delivered = len(list(stream))
    assert delivered == N or stream.skipped(), cut_block


def test_every_flipped_header_byte_is_reported(shard, members, tmp_path):
    raw = shard.read_bytes()
    at = members[2].offset
    path = tmp_path / "flipped.tar"
    for k in range(512):
        flipped = bytearray(raw)
        flipped[at + k] ^= 0xFF
        path.write_bytes(bytes(flipped))
        names, raised = names_until_error(path)
        assert raised or len(names) == N, (k, names)


USTAR_FIELDS = {  # name: (start, end) in a ustar header block
    "name": (0, 100), "mode": (100, 108), "uid": (108, 116), "gid": (116, 124),
    "size": (124, 136), "mtime": (136, 148), "typeflag": (156, 157), "linkname": (157, 257),
    "magic": (257, 263), "version": (263, 265), "uname": (265, 297), "gname": (297, 329),
    "devmajor": (329, 337), "devminor": (337, 345), "prefix": (345, 500),
}  # fmt: skip


@pytest.mark.parametrize("field", USTAR_FIELDS)
@pytest.mark.parametrize("fill", [b"\xff", b"7", b"\0"])
@pytest.mark.parametrize("fix_checksum", [False, True])
def test_every_header_field_damaged_is_reported(
    shard, members, tmp_path, field, fill, fix_checksum
):
    """Overwrite one field of a middle member's header. Either an error, or every member.

    With the checksum recomputed the header is valid again; only a type flag that turns
    the member into a metadata header (pax, GNU long name) could then hide the next
    member, and ``fill`` never writes one of those flags.
    """
    raw = bytearray(shard.read_bytes())
    at = members[2].offset
    start, end = USTAR_FIELDS[field]
    raw[at + start : at + end] = fill * (end - start)
    if fix_checksum:
        header = raw[at : at + 512]
        header[148:156] = b" " * 8
        raw[at + 148 : at + 156] = b"%06o\0 " % sum(header)
    path = damaged(tmp_path, bytes(raw))
    names, raised = names_until_error(path)
    assert raised or len(names) == N, names


# -- 9. arguments at their edges -----------------------------------------------------------


def test_wide_images_are_refused_not_clipped(tmp_path):
    from PIL import Image

    (tmp_path / "circle").mkdir()
    Image.fromarray(np.full((4, 4), 60000, np.uint16)).save(tmp_path / "circle" / "deep.png")
    with pytest.raises(data.CorruptItemError, match=r"deep\.png: a I;16\w? image cannot be read"):
        data.ImageFolder(tmp_path)[0]


def test_edges_of_folder_stream_and_member_arguments(shard):
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        data.ImageFolder(shard)
    with pytest.raises(ValueError, match="is listed twice"):
        data.ShardStream([shard, str(shard)])
    with pytest.raises(ValueError, match="classes must be distinct folder names"):
        data.ShardStream([shard], classes=())
    with pytest.raises(TypeError, match="transform must be callable or None, got int"):
        data.ShardStream([shard], transform=3)
    with pytest.raises(ValueError, match="offset must be < stride=2, got 2"):
        list(data.iter_members(shard, 2, 2))
    with pytest.raises(ValueError, match="buffer_size must be >= 1, got 0"):
        data.ShardStream([shard], buffer_size=0)
    with pytest.raises(TypeError, match="shards must be an int or a list of ints, got bool"):
        data.write_tar_shards([shard], shard.parent / "out", True)
    with pytest.raises(TypeError, match=r"data must be bytes, got str \(for a\.png\)"):
        data.decode_image("not bytes", where="a.png")
