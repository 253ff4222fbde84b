"""
Read a tensor as a view on a block of memory
============================================

.. effpt-before-you-start::
   :learn: - Read a tensor's storage, strides and offset, and tell which operations make
             views and which copy.
           - Share memory with NumPy and other libraries (``numpy()``, ``from_numpy``,
             DLPack), and convert NumPy's float64 at the boundary.
           - Save and load tensors with ``map_location`` and ``weights_only=True``, and
             ``clone()`` a slice before saving it.
   :read-first: Nothing: this page needs no other page.
   :needs: A CPU is enough. The first section copies one tensor to a CUDA or Apple MPS GPU
           when there is one; everything else runs on the CPU.

A tensor is a shape and a dtype laid over a flat block of memory, its storage. Once
you see the storage, you can tell which operations copy and which only reinterpret,
why a small slice can write a large file, and when NumPy and PyTorch share the same
bytes. This page creates tensors, looks underneath them, and saves them safely.
"""

# %%
# Creating tensors: dtype and device
# ----------------------------------
# :func:`torch.tensor` copies Python numbers into a new tensor. Every tensor has a
# ``dtype`` (Python floats become float32 and integers int64, unless you ask otherwise)
# and a ``device``. :meth:`torch.Tensor.to` converts either; when nothing needs to change
# it returns the very same tensor, not a copy.
# Not every device has every dtype (Apple's MPS has no float64), so the float64 copy
# below stays on the CPU.
import torch

from effpt.device import describe, pick_device

torch.manual_seed(0)
device = pick_device()
print(describe(device))

t = torch.tensor([[0.25, 1.5, 2.0], [0.75, 2.5, 3.0]])
print(t.dim(), tuple(t.shape), t.dtype, t.device)
t64 = t.to(torch.float64)  # a float64 copy, still on the CPU
on_device = t.to(device)  # a copy on the chosen device (t itself if that is the CPU)
print(t64.dtype, on_device.device, "| same object after a no-op .to():", t.to(t.device) is t)

# sphinx_gallery_start_ignore
assert t.dtype == torch.float32 and t.to(t.device) is t and t64.dtype == torch.float64
# sphinx_gallery_end_ignore

# %%
# Old constructors: ``torch.Tensor(3)`` is not the number 3
# ---------------------------------------------------------
# Old code (and code copied from it) builds tensors with ``torch.Tensor(...)`` or type
# names such as ``torch.FloatTensor``. Don't, as Thomas Viehmann's "Introduction to
# PyTorch" notebook advises. Given a number, they do not make a tensor
# holding it: they allocate that many *uninitialised* elements, whatever the memory held.
# And a type name fixes the device: ``FloatTensor`` is float32 on the CPU and refuses any
# other device. :func:`torch.tensor`, :func:`torch.zeros` or :func:`torch.empty` with
# ``dtype=`` and ``device=`` say what you mean.
print(
    "torch.tensor(3):", torch.tensor(3), "| torch.Tensor(3) has shape", tuple(torch.Tensor(3).shape)
)
try:
    torch.FloatTensor([1.0], device="meta")
except RuntimeError as err:
    legacy_error = str(err)
print("RuntimeError:", legacy_error)

# sphinx_gallery_start_ignore
assert torch.Tensor(3).shape == (3,) and torch.tensor(3).shape == ()
assert "legacy constructor" in legacy_error
# sphinx_gallery_end_ignore

# %%
# Indexing, masks and slices
# --------------------------
# Indexing reads and writes single elements; :meth:`~torch.Tensor.item` turns a one-element tensor into a
# Python number. float32 keeps about seven significant digits, so π written into ``t``
# comes back as ``3.1415927410125732``. A boolean mask selects (and here overwrites) every
# element where a condition holds; slices take ranges and steps.
import math

t[1, 2] = math.pi
print("t[1, 2].item() =", t[1, 2].item())
t[t < 1] = 0
print(t)
print(t[:, 1:], t[:, ::2], sep="\n")

# sphinx_gallery_start_ignore
assert t[1, 2].item() == 3.1415927410125732
assert (t[:, 0] == 0).all()
# sphinx_gallery_end_ignore

# %%
# The storage behind a tensor
# ---------------------------
# :meth:`~torch.Tensor.untyped_storage` is the flat block of bytes (``.storage()`` is
# deprecated). :meth:`~torch.Tensor.stride` says how many elements to skip to move one
# step along each dimension, and :meth:`~torch.Tensor.storage_offset` where the tensor
# starts. For this 2 × 3 float32
# tensor: 24 bytes, strides ``(3, 1)``, offset 0.
storage = t.untyped_storage()
print("storage bytes:", storage.nbytes(), "| stride:", t.stride(), "| offset:", t.storage_offset())

# sphinx_gallery_start_ignore
assert storage.nbytes() == 24 and t.stride() == (3, 1) and t.storage_offset() == 0
# sphinx_gallery_end_ignore

# %%
# Slices, diagonals and transposes are views
# ------------------------------------------
# ``t[:, 2:]`` copies nothing: it is a new shape, stride and offset (2) over the same
# storage, so its ``data_ptr`` is 2 × 4 = 8 bytes past ``t``'s. ``diagonal()`` steps 3 + 1 = 4
# elements at a time; the transpose just swaps the strides. Writing through a view
# changes the original.
col = t[:, 2:]
diag = t.diagonal()
tt = t.T
for name, view in [("t[:, 2:]", col), ("t.diagonal()", diag), ("t.T", tt)]:
    same = view.untyped_storage().data_ptr() == storage.data_ptr()
    print(
        f"{name:13} stride={view.stride()!s:7} offset={view.storage_offset()} shares storage: {same}"
    )
print("data_ptr difference of t[:, 2:]:", col.data_ptr() - t.data_ptr(), "bytes")
diag[0] = 100.0
print("t[0, 0] after writing diag[0]:", t[0, 0].item())

# sphinx_gallery_start_ignore
assert col.data_ptr() - t.data_ptr() == 8 and col.storage_offset() == 2
assert diag.stride() == (4,) and tt.stride() == (1, 3) and t[0, 0].item() == 100.0
assert all(v.untyped_storage().data_ptr() == storage.data_ptr() for v in (col, diag, tt))
# sphinx_gallery_end_ignore

# %%
# A picture of one storage and two views
# --------------------------------------
# Element ``[i, j]`` of a view lives at ``offset + i·stride[0] + j·stride[1]`` in the
# storage. The figure colours each element by that position: the tensor and its
# transpose hold the same six numbers, read in a different order.
import matplotlib.pyplot as plt

m = torch.arange(6.0).reshape(2, 3)  # (rows, cols)


def storage_positions(view: torch.Tensor) -> torch.Tensor:
    rows = torch.arange(view.shape[0])[:, None] * view.stride(0)  # (rows, 1)
    cols = torch.arange(view.shape[1])[None, :] * view.stride(1)  # (1, cols)
    return view.storage_offset() + rows + cols  # (rows, cols)


def draw_grid(ax, positions, name, title):
    ax.imshow(positions.numpy(), cmap="viridis", vmin=0, vmax=5)
    rows, cols = positions.shape
    for i in range(rows):
        for j in range(cols):
            p = positions[i, j].item()
            label = f"storage[{p}]" if name is None else f"{name}[{i}, {j}]\nstorage[{p}]"
            colour = "white" if p < 3 else "black"
            ax.text(j, i, label, ha="center", va="center", color=colour, fontsize=9)
    ax.set(title=title, xticks=[], yticks=[])


fig, axes = plt.subplot_mosaic(
    [["m", "mT"], ["s", "s"]], figsize=(8, 5), height_ratios=[3, 1], layout="constrained"
)
draw_grid(axes["m"], storage_positions(m), "m", f"m: shape (2, 3), stride {m.stride()}")
draw_grid(axes["mT"], storage_positions(m.T), "m.T", f"m.T: shape (3, 2), stride {m.T.stride()}")
draw_grid(axes["s"], torch.arange(6)[None], None, "the shared storage: 6 float32 values, 24 bytes")
plt.show()

# sphinx_gallery_start_ignore
assert torch.equal(m.flatten()[storage_positions(m.T)], m.T)
# sphinx_gallery_end_ignore

# %%
# ``contiguous()`` copies only when it must
# -----------------------------------------
# A tensor is contiguous when its elements sit in storage in row-major order. The
# transpose is not; :meth:`~torch.Tensor.view` refuses it, and
# :meth:`~torch.Tensor.contiguous` makes a copy with fresh
# strides ``(2, 1)``. On a tensor that is already contiguous it returns the tensor itself.
print("m.T contiguous:", m.T.is_contiguous())
try:
    m.T.view(6)
except RuntimeError as err:
    print("RuntimeError:", str(err).split(".")[0])
mt = m.T.contiguous()
print(
    "copy:",
    mt.data_ptr() != m.data_ptr(),
    "| stride:",
    mt.stride(),
    "| m.contiguous() is m:",
    m.contiguous() is m,
)

# sphinx_gallery_start_ignore
assert not m.T.is_contiguous() and mt.stride() == (2, 1) and m.contiguous() is m
# sphinx_gallery_end_ignore

# %%
# NumPy shares memory, and defaults to float64
# --------------------------------------------
# :meth:`~torch.Tensor.numpy` and :func:`torch.from_numpy` share the storage: a write on
# one side shows on the other. NumPy's default dtype is float64, PyTorch's float32; a
# float64 batch meets float32 weights in a layer and fails. Convert once, at the
# boundary, with :func:`torch.as_tensor` and an explicit dtype.
import numpy as np

arr = m.numpy()
arr[0, 0] = -1.0
print("m[0, 0] after writing the NumPy array:", m[0, 0].item())

batch = torch.from_numpy(np.linspace(0.0, 1.0, num=6).reshape(2, 3))  # (batch, features)
layer = torch.nn.Linear(3, 1)
print("dtype from NumPy:", batch.dtype)
try:
    layer(batch)
except RuntimeError as err:
    print("RuntimeError:", err)
print("fixed:", layer(torch.as_tensor(batch, dtype=torch.float32)).shape)

# sphinx_gallery_start_ignore
assert m[0, 0].item() == -1.0 and batch.dtype == torch.float64
# sphinx_gallery_end_ignore

# %%
# DLPack: sharing memory with any array library
# ---------------------------------------------
# NumPy shares memory with CPU tensors only. DLPack is a protocol for the same trick
# between any two array libraries (CuPy, JAX, NumPy, ...) on any device they share:
# :func:`torch.from_dlpack` wraps another library's array without copying, and that
# library's ``from_dlpack`` wraps a tensor. (:func:`torch.utils.dlpack.to_dlpack` and
# ``from_dlpack`` are the older, capsule-based spelling you will meet in old code.) With
# NumPy, the one other array library this page can count on:
arr = np.arange(4, dtype=np.float32)
shared = torch.from_dlpack(arr)
shared[0] = 9.0
print("NumPy array after writing through the tensor:", arr)
print("same address:", shared.data_ptr() == arr.ctypes.data)
print("np.from_dlpack(shared) shares it too:", np.shares_memory(np.from_dlpack(shared), arr))

# sphinx_gallery_start_ignore
assert arr[0] == 9.0 and shared.data_ptr() == arr.ctypes.data
assert np.shares_memory(np.from_dlpack(shared), arr)
# sphinx_gallery_end_ignore

# %%
# Saving and loading: ``.pt``, ``map_location``, ``weights_only``
# ---------------------------------------------------------------
# :func:`torch.save` writes a tensor (or a dict of them) to a ``.pt`` file; avoid
# ``.pth``, the extension of Python's own path configuration files. :func:`torch.load`
# takes ``map_location`` to choose the device (a GPU checkpoint loads on a CPU-only
# machine) and ``weights_only=True`` (the default since torch 2.6), which refuses
# anything but tensors and plain containers, so that loading an untrusted file cannot
# run code. ``torch.save`` writes a view's whole storage, though: a
# 10-element slice of a million-element tensor writes 4 MB, its ``clone()`` under 2 kB.
import tempfile
from pathlib import Path

with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "tensor.pt"
    torch.save(t, path)
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    print("round trip equal:", torch.equal(loaded, t))

    big = torch.zeros(1_000_000)
    torch.save(big[:10], path)
    slice_bytes = path.stat().st_size
    torch.save(big[:10].clone(), path)
    clone_bytes = path.stat().st_size
print(
    f"file of big[:10]: {slice_bytes / 1e6:.1f} MB, of big[:10].clone(): {clone_bytes / 1e3:.1f} kB"
)

# sphinx_gallery_start_ignore
assert torch.equal(loaded, t)
assert slice_bytes > 4e6 and clone_bytes < 2e3
# sphinx_gallery_end_ignore

# %%
# ``weights_only`` at work
# ------------------------
# A checkpoint holding an arbitrary Python object is refused. The line of the error that
# matters names the class and the two ways to allow it if you trust the file:
# :func:`~torch.serialization.add_safe_globals` for the whole program, or the
# ``safe_globals`` context manager,
# used below to load the same file.
import pickle
import textwrap
from dataclasses import dataclass


@dataclass
class RunNotes:
    text: str


with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "checkpoint.pt"
    torch.save({"weights": t, "notes": RunNotes("first try")}, path)
    try:
        torch.load(path, weights_only=True)
    except pickle.UnpicklingError as err:
        message = next(line for line in str(err).splitlines() if "Unsupported global" in line)
        print(textwrap.fill(message.strip(), width=88))
    with torch.serialization.safe_globals([RunNotes]):
        checkpoint = torch.load(path, weights_only=True)
    print("loaded with RunNotes allowed:", checkpoint["notes"])

# sphinx_gallery_start_ignore
assert "RunNotes" in message and "safe_globals" in message
assert checkpoint["notes"] == RunNotes("first try")
# sphinx_gallery_end_ignore

# %%
# A sparse tensor stores only its non-zeros
# -----------------------------------------
# Strided tensors are one layout among several. A sparse COO tensor
# (:func:`torch.sparse_coo_tensor`) keeps the indices
# and values of its non-zero elements: here 3 of 20. Pass ``check_invariants=True`` so
# that out-of-range indices raise an error instead of corrupting memory later.
indices = torch.tensor([[0, 1, 3], [2, 0, 4]])  # (dims, nnz)
values = torch.tensor([1.0, 2.0, 3.0])  # (nnz,)
s = torch.sparse_coo_tensor(indices, values, size=(4, 5), check_invariants=True).coalesce()
print(s.layout, "| non-zeros:", s.values().numel(), "of", s.numel())
print(s.to_dense())

# sphinx_gallery_start_ignore
assert s.values().numel() == 3 and s.numel() == 20 and s.to_dense()[3, 4] == 3.0
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - A tensor is shape, strides and an offset over a storage; slicing, ``diagonal`` and
#   ``.T`` make views that share it, and writes through a view show in the original.
# - ``contiguous()`` copies only when the layout needs it; ``numpy()``, ``from_numpy`` and
#   ``from_dlpack`` never copy, and NumPy's float64 must be converted at the boundary.
# - Make tensors with ``torch.tensor`` and the factory functions, never ``torch.Tensor(n)``
#   or ``torch.FloatTensor``.
# - Save ``.pt`` files, load with ``map_location`` and ``weights_only=True``, and
#   ``clone()`` a slice before saving it unless you mean to save the whole storage.
