"""
Write checkpoint files safely and load them cheaply
===================================================

.. effpt-before-you-start::
   :learn: - Write a checkpoint to a temporary file and ``os.replace`` it, so that a crash
             mid-write leaves the previous one whole.
           - Load through one function that refuses truncated and foreign files with an
             error naming the file.
           - Load with ``weights_only=True``, and allow a class you trust with
             ``safe_globals``.
           - Measure what ``mmap=True`` and a model built on the ``meta`` device save in
             memory and time, and read the verdicts.
   :read-first: :doc:`/auto_examples/basics/plot_modules` for ``state_dict`` and
                ``weights_only``; :doc:`plot_checkpoint_and_resume` for what a checkpoint
                holds.
   :needs: A CPU is enough: everything runs on the CPU, whatever the device. The page
           writes its files, a 64 MiB checkpoint among them, to a new temporary folder
           (``effpt-files-...``) and deletes it at the end. It reads resident memory from
           ``/proc/self/statm`` (Linux); elsewhere it says that memory is not measured.

A checkpoint is only useful if it is there, whole, when the job restarts, and if
loading it can neither run someone else's code nor exhaust the machine's memory. This
page writes a checkpoint so that a crash mid-write leaves the previous one in place,
loads it with ``weights_only=True`` behind a loader that refuses truncated and foreign
files by name, and measures what ``mmap=True`` and a model built on the ``meta`` device
save when the checkpoint is large.
"""

# %%
# A crash in the middle of ``torch.save``
# ---------------------------------------
# ``torch.save(state, "ckpt.pt")`` opens the file for writing, which empties it, and then
# writes. A process killed in between leaves a truncated file where the last good
# checkpoint was. The page simulates that death with a file that raises after a given
# number of bytes; ``opener`` exists only so that the page can pass it in. The files go
# to a temporary folder that the end of the page deletes (and Python does, at exit, if
# the page stops before).
import os
import tempfile
from pathlib import Path

import torch
from torch import nn

from effpt.device import describe

device = torch.device("cpu")  # every file on this page is written and read on the CPU
print(describe(device))
workdir = tempfile.TemporaryDirectory(prefix="effpt-files-")
folder = Path(workdir.name)


class CrashingFile:
    """A binary file whose writer dies after ``limit`` bytes."""

    def __init__(self, path: Path, mode: str, limit: int) -> None:
        self.file, self.left = open(path, mode), limit  # noqa: SIM115  (closed in __exit__)

    def write(self, data) -> int:
        if len(data) > self.left:
            self.file.write(bytes(data)[: self.left])
            self.left = 0
            raise OSError("simulated crash: the process died while writing")
        self.left -= len(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def fileno(self) -> int:
        return self.file.fileno()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


def save_naive(state: dict, path: Path, opener=open) -> None:
    with opener(path, "wb") as f:
        torch.save(state, f)


# %%
# The first save succeeds; the second dies halfway through the same file.
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
FORMAT = "effpt-training-checkpoint/1"
state = {"format": FORMAT, "model": model.state_dict(), "step": 100}
path = folder / "ckpt.pt"
save_naive(state, path)
size = path.stat().st_size
try:
    save_naive({**state, "step": 200}, path, lambda p, m: CrashingFile(p, m, size // 2))
except Exception as exc:  # noqa: BLE001  (torch.save reports the dead file its own way)
    print(f"save failed: {exc.__context__ or exc}")
print(f"whole checkpoint {size:,} bytes; after the crash the file has {path.stat().st_size:,}")

# sphinx_gallery_start_ignore
assert path.stat().st_size < size
# sphinx_gallery_end_ignore


# %%
# Write elsewhere, then rename
# ----------------------------
# The safe way writes a temporary file in the same folder, flushes Python's buffer,
# asks the OS to put the bytes on disk (``os.fsync``), and only then renames it over the
# old name with :func:`os.replace`. On POSIX systems a rename within one file system is
# atomic: a reader, or the job restarting after a crash, finds the old checkpoint or the
# new one, never a mix, and syncing the folder makes the rename itself survive a power
# cut. (Windows promises less, and ``os.replace`` is the closest it offers.)
def save_atomic(state: dict, path: Path, opener=open) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # same folder, same file system
    try:
        with opener(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # after a failure, no half-written file stays behind
    if os.name == "posix":
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


save_atomic(state, path)
try:
    save_atomic({**state, "step": 200}, path, lambda p, m: CrashingFile(p, m, size // 2))
except Exception as exc:  # noqa: BLE001
    print(f"save failed: {exc.__context__ or exc}")
kept = torch.load(path, weights_only=True)
print(f"{path.name}: {path.stat().st_size:,} bytes, step {kept['step']}")
print(f"files in the folder: {sorted(p.name for p in folder.iterdir())}")

# sphinx_gallery_start_ignore
assert kept["step"] == 100 and path.stat().st_size == size
assert [p.name for p in folder.iterdir()] == ["ckpt.pt"]
# sphinx_gallery_end_ignore

# %%
# A loader that says what is wrong
# --------------------------------
# A job that restarts from the truncated file of the first section should stop with
# an error a person can act on. A loader should refuse a file that is not a whole checkpoint, or not one of this program (a bare
# state dict, another tool's file), with an error naming the file and what it found.
# ``torch.save`` writes a zip archive whose directory comes last, so a truncated file
# starts like a checkpoint and lacks its end. The loader uses ``weights_only=True``,
# explained in the next section.


import zipfile


class CheckpointError(ValueError):
    """The file is not a complete checkpoint written by this program."""


def load_checkpoint(path: Path) -> dict:
    with open(path, "rb") as f:
        head = f.read(4)
    if head != b"PK\x03\x04":  # torch.save writes a zip archive
        msg = f"{path}: not a PyTorch checkpoint (it starts with {head!r}, not a zip archive)"
        raise CheckpointError(msg)
    if not zipfile.is_zipfile(path):  # the archive's directory, written last, is missing
        msg = (
            f"{path}: truncated ({path.stat().st_size:,} bytes, the end of the archive is missing)"
        )
        raise CheckpointError(msg)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:120]
        raise CheckpointError(f"{path}: cannot be loaded ({type(exc).__name__}: {first})") from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = f"keys {sorted(state)[:4]}" if isinstance(state, dict) else type(state).__name__
        msg = f"{path}: not a checkpoint of this program (no format {FORMAT!r}; found {found})"
        raise CheckpointError(msg)
    return state


# %%
# Three bad files: the first half of a checkpoint (what the crash left), a bare state
# dict and a text file.
(folder / "truncated.pt").write_bytes(path.read_bytes()[: size // 2])
torch.save(model.state_dict(), folder / "weights_only.pt")
(folder / "notes.txt").write_text("not a checkpoint\n")
errors = {}
for name in ("truncated.pt", "weights_only.pt", "notes.txt"):
    try:
        load_checkpoint(folder / name)
    except CheckpointError as exc:
        errors[name] = str(exc)
        print(f"CheckpointError: {exc}")
print(f"loads: step {load_checkpoint(path)['step']}")

# sphinx_gallery_start_ignore
assert set(errors) == {"truncated.pt", "weights_only.pt", "notes.txt"}
assert all(str(folder / name) in msg for name, msg in errors.items())
assert "truncated" in errors["truncated.pt"] and "not a PyTorch" in errors["notes.txt"]
assert "found keys ['0.bias'" in errors["weights_only.pt"]
# sphinx_gallery_end_ignore

# %%
# Load only data, allow-list what you trust
# -----------------------------------------
# A ``.pt`` file is a pickle, and unpickling can call any function the file names. With
# ``weights_only=True`` (the default since torch 2.6), :func:`torch.load` rebuilds only
# tensors, numbers, strings and containers, and raises for anything else, naming it.
# Checkpoints often hold more, such as the ``argparse.Namespace`` of the run's
# options. If you trust a class, allow it for one load with
# :func:`torch.serialization.safe_globals`, or for the whole process with
# :func:`torch.serialization.add_safe_globals`.
import argparse
import pickle

options = argparse.Namespace(lr=0.01, batch_size=32)
save_atomic({**state, "options": options}, folder / "with_options.pt")
try:
    torch.load(folder / "with_options.pt", weights_only=True)
except pickle.UnpicklingError as exc:
    refused = next(line for line in str(exc).splitlines() if "argparse" in line)
    print(f"UnpicklingError: ... {refused.strip().split('. ')[0]}. ...")
with torch.serialization.safe_globals([argparse.Namespace]):
    loaded = torch.load(folder / "with_options.pt", weights_only=True)
print(f"with the class allowed: {loaded['options']}")

# sphinx_gallery_start_ignore
assert "argparse.Namespace" in refused
assert loaded["options"] == options
# sphinx_gallery_end_ignore

# %%
# Map a large checkpoint instead of reading it
# --------------------------------------------
# A plain ``torch.load`` reads every tensor into memory. With ``mmap=True`` it maps the
# file instead: a tensor's bytes are read when something touches them, and the OS can
# drop them again under memory pressure. The cell measures how much the process's
# resident memory grows while the loaded state is alive (``/proc/self/statm``, Linux;
# elsewhere it says so). ``settle`` first asks glibc to return memory freed earlier
# (``malloc_trim``), which would otherwise hide a new allocation. The checkpoint is
# 64 MiB on every device: it is loaded on the CPU.
import contextlib
import ctypes
import gc
import time


def settle() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc only; elsewhere nothing to do
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None  # no /proc: macOS, Windows


def make_big() -> nn.Module:
    return nn.Sequential(*[nn.Linear(1024, 1024, bias=False) for _ in range(16)])  # 64 MiB


big_path = folder / "big.pt"
save_atomic(make_big().state_dict(), big_path)
mib = big_path.stat().st_size / 2**20
growth, load_s = {}, {}
for how in ("mmap=True", "plain"):
    settle()
    before, start = resident_bytes(), time.perf_counter()
    big_state = torch.load(big_path, weights_only=True, mmap=how == "mmap=True")
    load_s[how] = time.perf_counter() - start
    after = resident_bytes()
    del big_state
    if before is not None:
        growth[how] = (after - before) / 2**20
        print(f"torch.load({how:<9}) of {mib:.0f} MiB: resident memory +{growth[how]:.1f} MiB")
    else:
        print(f"torch.load({how}): resident memory not measured here")

# %%
# Mapping should leave the file's bytes on disk until they are used; the statement is
# held against this machine's numbers (a mapped load counted as at least 1 MiB):
from effpt.expect import expect

if growth:
    _ = expect(
        "torch.load(mmap=True) grows resident memory at least 10 times less than a plain load",
        growth["plain"] / max(growth["mmap=True"], 1.0),
        above=10,
        device=device,
    )

# %%
# Build on the meta device, then take the loaded tensors
# ------------------------------------------------------
# ``model = make_big(); model.load_state_dict(state)`` first allocates and randomly
# initializes every parameter, then copies the checkpoint over them. A model built
# under ``torch.device("meta")`` has parameters with shapes and no storage, so building
# it allocates nothing and draws no random numbers; ``load_state_dict(state, assign=True)`` then makes
# the loaded tensors its parameters instead of copying. With a mapped checkpoint, the
# parameters' bytes are read from the file when first used. Each way runs 5 times, in
# turns (enough runs for the verdict's interval); memory is from the first run of each.


def usual() -> nn.Module:
    model = make_big()
    model.load_state_dict(torch.load(big_path, weights_only=True, mmap=True))
    return model


def meta_assign() -> nn.Module:
    with torch.device("meta"):
        model = make_big()
    model.load_state_dict(torch.load(big_path, weights_only=True, mmap=True), assign=True)
    return model


seconds, grown = {usual: [], meta_assign: []}, {}
for _ in range(5):
    for build in (meta_assign, usual):
        settle()
        before, start = resident_bytes(), time.perf_counter()
        built = build()
        seconds[build].append(time.perf_counter() - start)
        if before is not None and build not in grown:
            grown[build] = (resident_bytes() - before) / 2**20
        del built
for build in (usual, meta_assign):
    memory = f"+{grown[build]:.1f} MiB resident" if grown else "memory not measured here"
    print(f"{build.__name__:>11}: {sorted(seconds[build])[2] * 1e3:7.1f} ms (median), {memory}")

# %%
# Both ways give the same model; whether the second is faster and lighter here:
from effpt.bench import Timing
from effpt.records import speedup

x = torch.randn(4, 1024)  # (batch, features)
same = torch.equal(usual()(x), meta_assign()(x))
print(f"same outputs: {same}")
timed = {b: Timing(per_call=tuple(s), number=1) for b, s in seconds.items()}
_ = expect(
    "meta device + assign=True builds the loaded model faster than init + copy",
    speedup(timed[usual], timed[meta_assign]),
    above=1.0,
    device=device,
)
if grown:
    _ = expect(
        "meta device + assign=True from a mapped checkpoint grows resident memory at least 10 times less",
        grown[usual] / max(grown[meta_assign], 1.0),
        above=10,
        device=device,
    )

# sphinx_gallery_start_ignore
assert same
# sphinx_gallery_end_ignore

# %%
# The four ways side by side: time on a logarithmic axis (each run a point), resident
# memory growth where it was measured.
import matplotlib.pyplot as plt

ways = {
    "torch.load": ([load_s["plain"]], growth.get("plain")),
    "torch.load(mmap=True)": ([load_s["mmap=True"]], growth.get("mmap=True")),
    "init + copy": (seconds[usual], grown.get(usual)),
    "meta + assign": (seconds[meta_assign], grown.get(meta_assign)),
}
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), layout="constrained")
for i, (times, _) in enumerate(ways.values()):
    left.plot([i] * len(times), [t * 1e3 for t in times], "o", color="C0")
left.set(yscale="log", ylabel="ms", title=f"Time, {mib:.0f} MiB checkpoint")
measured = [(i, mem) for i, (_, mem) in enumerate(ways.values()) if mem is not None]
if measured:
    right.plot(*zip(*measured, strict=True), "o", color="C1")
    right.axhline(0, color="grey", linewidth=0.8)
else:
    right.text(0.5, 0.5, "not measured here (no /proc)", ha="center", transform=right.transAxes)
right.set(ylabel="resident memory growth, MiB", title="Memory")
for ax in (left, right):
    ax.set_xticks(range(len(ways)))
    ax.set_xticklabels(list(ways), rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(ways) - 0.5)
plt.show()

# %%
# The page is done with its files; it deletes their folder:
workdir.cleanup()
print(f"folder still there: {folder.exists()}")

# sphinx_gallery_start_ignore
assert not folder.exists()
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - Never write a checkpoint over the previous one: write a temporary file in the same
#   folder, flush, ``os.fsync``, then ``os.replace``; a crash leaves the old file whole.
# - Load through one function that uses ``weights_only=True`` and ``map_location``, and
#   that refuses truncated and foreign files with an error naming the file.
# - Allow-list a class you trust with ``torch.serialization.safe_globals`` (one load) or
#   ``add_safe_globals`` (the process); never load an untrusted file with
#   ``weights_only=False``.
# - ``torch.load(..., mmap=True)`` maps a large checkpoint instead of reading it; build
#   the model on the ``meta`` device and ``load_state_dict(..., assign=True)`` to skip the
#   random initialization and the copy. Both effects were measured above.
# - Resuming a run exactly, and saving from several processes, is
#   :doc:`plot_checkpoint_and_resume`.
