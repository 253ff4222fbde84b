"""docs/_ext/effpt_site/kept.py: files one build keeps for the next, removed once unused."""

from __future__ import annotations

import gc
import os
import pickle
import time

import pytest

from effpt_site import code_links, images, kept


def age(path, days: float) -> None:
    then = time.time() - days * 24 * 3600
    os.utime(path, (then, then))


def test_only_files_unused_for_the_whole_period_are_removed(tmp_path):
    old, recent, other = tmp_path / "a.pickle", tmp_path / "b.pickle", tmp_path / "c.png"
    for path in (old, recent, other):
        path.write_bytes(b"x")
    age(old, kept.UNUSED_DAYS + 1)
    age(recent, kept.UNUSED_DAYS - 1)
    age(other, kept.UNUSED_DAYS + 1)
    assert kept.prune_unused(tmp_path, "*.pickle") == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.pickle", "c.png"]


def test_a_folder_no_build_made_has_nothing_to_remove(tmp_path):
    assert kept.prune_unused(tmp_path / "never made") == []


def test_a_subfolder_is_never_removed(tmp_path):
    (tmp_path / "sub").mkdir()
    age(tmp_path / "sub", kept.UNUSED_DAYS + 1)
    assert kept.prune_unused(tmp_path) == []


def test_both_keepers_prune_through_it():
    # One rule for every kept file: the code cells and the thumbnails do not drift apart.
    assert code_links.prune_unused is images.prune_unused is kept.prune_unused


def _write_many(path, fill: int, rounds: int) -> None:
    for _ in range(rounds):
        kept.store(path, bytes([fill]) * (1 << 20))


def test_two_processes_storing_one_file_never_leave_half_of_each(tmp_path):
    # The Chinese pass writes pages in two processes; both may keep the same thumbnail.
    import multiprocessing as mp

    path = tmp_path / "thumb.png"
    context = mp.get_context("fork")
    writers = [context.Process(target=_write_many, args=(path, f, 60)) for f in (1, 2)]
    for w in writers:
        w.start()
    seen = set()
    while any(w.is_alive() for w in writers):
        if path.exists():
            data = path.read_bytes()
            seen.add((len(data), len(set(data))))
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert seen <= {(1 << 20, 1)}, seen  # always one writer's whole file
    assert [p.name for p in tmp_path.iterdir()] == ["thumb.png"]


class _SeesTheCollector:
    """Unpickles to a record of whether the cyclic collector ran while it was made."""

    def __reduce__(self):
        return (gc.isenabled, ())


def test_a_kept_file_is_made_with_the_collector_paused_and_then_resumed(tmp_path):
    path = tmp_path / "cell.pickle"
    kept.store(path, pickle.dumps(_SeesTheCollector()))
    assert kept.load(path) is False  # paused while the objects were made
    assert gc.isenabled()


def test_a_collector_the_caller_paused_stays_paused(tmp_path):
    path = tmp_path / "cell.pickle"
    kept.store(path, pickle.dumps([1]))
    gc.disable()
    try:
        assert kept.load(path) == [1]
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_damaged_kept_file_raises_and_resumes_the_collector(tmp_path):
    path = tmp_path / "cell.pickle"
    path.write_bytes(pickle.dumps(list(range(100)))[:-7])
    with pytest.raises((pickle.UnpicklingError, EOFError)):
        kept.load(path)
    assert gc.isenabled()


def test_loading_marks_the_file_used(tmp_path):
    path = tmp_path / "cell.pickle"
    kept.store(path, pickle.dumps([1]))
    age(path, 31)
    kept.load(path)
    assert kept.prune_unused(tmp_path, "*.pickle") == []
