"""effpt.data: exactly-once delivery, start methods, determinism, loud errors on bad input."""

from __future__ import annotations

import io
import multiprocessing
import tarfile
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from effpt import data

# Tests run more workers than this machine may have cores, on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

# Unequal shard sizes: 8 shards, 1 to 5 items each, 24 items in all.
SIZES = [3, 1, 5, 2, 4, 1, 3, 5]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return data.write_image_folder(tmp_path_factory.mktemp("images"), sum(SIZES), size=8)


@pytest.fixture(scope="module")
def shards(images, tmp_path_factory):
    return data.write_tar_shards(images, tmp_path_factory.mktemp("shards"), SIZES)


def expected_keys(images, n_shards):
    return sorted(f"{p.parent.name}/{p.stem}" for p in images[: sum(SIZES[:n_shards])])


def loader_keys(dataset, num_workers, context=None, batch_size=2):
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=num_workers,
        multiprocessing_context=context if num_workers else None,
    )
    return [key for _, _, keys in loader for key in keys]


@pytest.mark.parametrize("n_shards", range(1, 9))
@pytest.mark.parametrize("num_workers", range(5))
def test_every_item_exactly_once_for_every_worker_share(images, shards, n_shards, num_workers):
    """The whole grid, with each worker's share computed as the worker would compute it."""
    stream = data.ShardStream(shards[:n_shards])
    keys = [
        key
        for worker in range(max(num_workers, 1))
        for _, _, key in stream.iter_worker(worker, max(num_workers, 1))
    ]
    assert sorted(keys) == expected_keys(images, n_shards)


@pytest.mark.parametrize(
    ("n_shards", "num_workers"), [(8, 0), (1, 2), (3, 2), (2, 4), (8, 3), (5, 4)]
)
def test_exactly_once_through_real_workers(images, shards, n_shards, num_workers):
    keys = loader_keys(data.ShardStream(shards[:n_shards]), num_workers)
    assert sorted(keys) == expected_keys(images, n_shards)


@pytest.mark.parametrize(
    ("method", "n_shards", "num_workers"),
    [("fork", 2, 3), ("spawn", 1, 2), ("forkserver", 2, 3)],  # spawn is slow: every worker
)  # imports torch afresh, so it gets the smallest case that still shares a shard
def test_exactly_once_under_every_start_method(images, shards, method, n_shards, num_workers):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"start method {method!r} is not available on this platform")
    context = multiprocessing.get_context(method)
    if method == "forkserver":  # workers fork from a server that has imported torch once
        context.set_forkserver_preload(["torch", "effpt.data"])
    # More workers than shards, so workers share a shard; under spawn and forkserver the
    # dataset reaches the workers by pickle, so its class must be importable.
    stream = data.ShardStream(shards[:n_shards], shuffle=True)
    keys = loader_keys(stream, num_workers, context)
    assert sorted(keys) == expected_keys(images, n_shards)


def test_order_is_deterministic_for_a_fixed_seed(images, shards):
    def order(seed, workers):
        stream = data.ShardStream(shards, shuffle=True, seed=seed, buffer_size=4)
        return [k for w in range(workers) for _, _, k in stream.iter_worker(w, workers)]

    assert order(1, 3) == order(1, 3)
    assert order(1, 3) != order(2, 3)
    assert sorted(order(1, 3)) == expected_keys(images, 8)
    with_workers = data.ShardStream(shards, shuffle=True, seed=1, buffer_size=4)
    assert loader_keys(with_workers, 2) == loader_keys(with_workers, 2)


@given(
    num_shards=st.integers(1, 12),
    num_workers=st.integers(1, 12),
    sizes=st.lists(st.integers(0, 9), min_size=12, max_size=12),
)
def test_shard_plan_covers_every_position_once(num_shards, num_workers, sizes):
    seen = Counter()
    for worker in range(num_workers):
        for shard, stride, offset in data.shard_plan(num_shards, worker, num_workers):
            seen.update((shard, pos) for pos in range(offset, sizes[shard], stride))
    everything = {(s, p) for s in range(num_shards) for p in range(sizes[s])}
    assert set(seen) == everything
    assert all(n == 1 for n in seen.values())


def test_items_decode_to_the_pixels_that_were_written(images, shards):
    from PIL import Image

    image, label, key = next(iter(data.ShardStream(shards[:1])))
    reference = torch.from_numpy(np.array(Image.open(images[0]).convert("RGB"))).permute(2, 0, 1)
    assert torch.equal(image, reference)
    assert data.SHAPES[label] == images[0].parent.name
    assert key == f"{images[0].parent.name}/{images[0].stem}"
    folder = data.ImageFolder(images[0].parent.parent)
    assert folder.classes == sorted({p.parent.name for p in images})
    assert sum(torch.equal(folder[i][0], reference) for i in range(len(folder))) >= 1


# -- bad input -------------------------------------------------------------------------


def cut_inside_member(shard, k, path):
    """Write ``shard`` cut in the middle of its member ``k``'s data to ``path``."""
    with tarfile.open(shard) as tar:
        members = tar.getmembers()
    end = members[k].offset_data + members[k].size // 2
    path.write_bytes(shard.read_bytes()[:end])
    return [m.name for m in members]


def test_truncated_shard_names_shard_and_member(shards, tmp_path):
    cut = tmp_path / "cut.tar"
    names = cut_inside_member(shards[2], 2, cut)  # shard 2 has 5 members
    with pytest.raises(data.CorruptItemError, match=r"cut\.tar' is truncated or damaged at member"):
        list(data.ShardStream([cut]))
    with pytest.raises(data.CorruptItemError) as info:
        list(data.ShardStream([cut]))
    assert f"at member '{names[2]}'" in str(info.value)


def test_member_that_is_not_an_image(shards, tmp_path):
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar, tarfile.open(shards[0]) as good:
        for member in good:
            tar.addfile(member, good.extractfile(member))
        note = tarfile.TarInfo("circle/notes.png")
        note.size = 5
        tar.addfile(note, io.BytesIO(b"hello"))
    pattern = r"shard '.*bad\.tar', member 'circle/notes\.png': not a readable image"
    with pytest.raises(data.CorruptItemError, match=pattern):
        list(data.ShardStream([bad]))
    # The same error crosses from a worker process with its type and message.
    with pytest.raises(data.CorruptItemError, match=pattern):
        loader_keys(data.ShardStream([bad]), num_workers=1)


def test_member_in_an_unknown_class_folder(shards):
    with pytest.raises(data.CorruptItemError, match=r"member '.*': folder '.*' is not a class"):
        list(data.ShardStream(shards[:1], classes=("dog", "cat")))


def test_skip_bad_counts_what_it_skipped(shards, tmp_path):
    cut = tmp_path / "cut.tar"
    cut_inside_member(shards[2], 2, cut)
    stream = data.ShardStream([shards[0], cut], skip_bad=True)
    with pytest.warns(data.SkippedItemsWarning, match=r"skipped 1 bad item\(s\) in epoch 0"):
        items = list(stream)
    assert len(items) == SIZES[0] + 2  # shard 0, then the 2 members before the cut
    [skip] = stream.skipped()
    assert (skip.shard, skip.member) == (str(cut), None)


def test_missing_paths_and_empty_lists(tmp_path, shards):
    with pytest.raises(FileNotFoundError, match=r"image folder '.*nowhere' does not exist"):
        data.ImageFolder(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="holds no images"):
        data.ImageFolder(tmp_path)
    with pytest.raises(ValueError, match="at least one tar file, got an empty list"):
        data.ShardStream([])
    with pytest.raises(FileNotFoundError, match=r"shard '.*gone\.tar' does not exist"):
        data.ShardStream([*shards[:1], tmp_path / "gone.tar"])
    with pytest.raises(TypeError, match="got the single path"):
        data.ShardStream(str(shards[0]))


def test_unreadable_image_file_names_its_path(tmp_path):
    (tmp_path / "circle").mkdir()
    (tmp_path / "circle" / "00000.png").write_bytes(b"\x89PNG broken")
    with pytest.raises(data.CorruptItemError, match=r"00000\.png: not a readable image"):
        data.ImageFolder(tmp_path)[0]


def test_shard_plan_rejects_bad_arguments():
    with pytest.raises(ValueError, match="worker_id must be < num_workers=2, got 2"):
        data.shard_plan(3, 2, 2)
    with pytest.raises(ValueError, match="num_shards must be >= 1, got 0"):
        data.shard_plan(0, 0, 1)
    with pytest.raises(TypeError, match="num_workers must be an int, got float"):
        data.shard_plan(1, 0, 1.0)


# -- randomness in workers -------------------------------------------------------------


def crop_offsets(dataset, **loader_args):
    loader = DataLoader(dataset, batch_size=4, num_workers=2, **loader_args)
    return [offsets for _, _, offsets in loader]  # batch k came from worker k % 2


def test_a_numpy_generator_is_copied_into_every_worker(images):
    folder = data.ImageFolder(images[0].parent.parent)
    crops = data.RandomCrops(folder, 4, rng=np.random.default_rng(0))
    batches = crop_offsets(crops)
    assert torch.equal(batches[0], batches[1])  # worker 0 and worker 1 drew the same
    fixed = crop_offsets(crops, worker_init_fn=data.seed_worker)
    assert not torch.equal(fixed[0], fixed[1])

    def seeded_run():
        generator = torch.Generator().manual_seed(3)
        return torch.cat(crop_offsets(crops, worker_init_fn=data.seed_worker, generator=generator))

    assert torch.equal(seeded_run(), seeded_run())


# -- packaging -------------------------------------------------------------------------


def test_shards_are_byte_identical_when_written_again(images, shards, tmp_path):
    again = data.write_tar_shards(images, tmp_path, SIZES)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in shards]


def test_importing_effpt_data_does_not_need_pillow():
    import subprocess
    import sys

    code = "import sys; sys.modules['PIL'] = None; import effpt.data; print('ok')"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr
