"""effpt.data.start_method: fork where nothing could be imported by a worker, else the default."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from types import ModuleType

import pytest

from effpt.data import start_method

HAS_FORK = "fork" in multiprocessing.get_all_start_methods()


def module(file: str | None) -> ModuleType:
    main = ModuleType("__main__")
    if file is not None:
        main.__file__ = file
    return main


def test_a_script_run_from_a_file_gets_the_platform_default():
    assert start_method(module("/somewhere/plot_page.py")) is None


@pytest.mark.skipif(not HAS_FORK, reason="this platform has no fork")
def test_code_without_a_file_gets_fork():
    assert start_method(module(None)) == "fork"


def test_without_a_file_and_without_fork_it_leaves_the_default(monkeypatch):
    # Windows: nothing to fork, and nothing a spawned worker could import either.
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert start_method(module(None)) is None


def test_a_file_of_none_counts_as_no_file():
    expected = "fork" if HAS_FORK else None
    assert start_method(module(None)) == expected
    main = module(None)
    main.__file__ = None
    assert start_method(main) == expected


def test_by_default_it_asks_the_main_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "__main__", module(None))
    assert start_method() == ("fork" if HAS_FORK else None)
    monkeypatch.setitem(sys.modules, "__main__", module("/somewhere/plot_page.py"))
    assert start_method() is None


@pytest.mark.parametrize("bad", ["__main__", 3, {"__file__": "x.py"}])
def test_anything_but_a_module_is_refused_by_name(bad):
    with pytest.raises(TypeError, match=r"main must be a module or None, got "):
        start_method(bad)


# A notebook's cell: the class is defined in code that has no file, the default start
# method is spawn (as on macOS), and the workers still find the class because
# start_method() asks for fork.
NOTEBOOK_CELL = """
import multiprocessing as mp
mp.set_start_method("spawn", force=True)
cell = '''
import torch
from torch.utils.data import DataLoader, Dataset
from effpt.data import start_method

class Squares(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return i * i

method = {method}
loader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context=method)
print(method, [b.tolist() for b in loader])
'''
exec(compile(cell, "<cell>", "exec"), {{"__name__": "__main__"}})
"""


def run_cell(method: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NOTEBOOK_CELL.format(method=method)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.skipif(not HAS_FORK, reason="this platform has no fork")
def test_a_notebook_cell_with_its_own_class_loads_through_workers():
    run = run_cell("start_method()")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "fork [[0, 1, 4, 9], [16, 25, 36, 49]]"


def test_without_it_the_same_cell_fails_under_spawn():
    # What start_method() prevents: spawned workers cannot find the cell's class.
    run = run_cell("None")
    assert run.returncode != 0
    assert "Squares" in run.stderr  # the error names the class the workers could not find
