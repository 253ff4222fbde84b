"""
Move from TorchScript to torch.compile and torch.export
=======================================================

TorchScript turned Python functions into graphs that ran without Python and could be
saved for deployment. It is deprecated now, but it still turns up in older code and in
saved models. This page shows the two ways of making TorchScript and the trap in one of
them, then does the same jobs the current way: :func:`torch.compile` to make code
faster and :func:`torch.export.export` to ship it.

To run this page on its own: ``pip install effpt==0.2.0``, then ``python plot_torchscript_to_compile.py``.
"""

# %%
# TorchScript warns that it is deprecated
# ---------------------------------------
# The function below squares its input once per dimension: the number of loop
# iterations depends on the input. :func:`torch.jit.script` still compiles it, and
# warns. The warning is caught and printed here, once; after that, a small context
# manager silences exactly these TorchScript deprecation warnings, so that any other
# warning still surfaces.
import contextlib
import warnings

import torch

torch.manual_seed(0)


def square_per_dim(x: torch.Tensor) -> torch.Tensor:
    for _ in range(x.dim()):
        x = x * x
    return x


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scripted = torch.jit.script(square_per_dim)
for message in sorted({str(w.message) for w in caught}):
    print(f"{caught[0].category.__name__}: {message}")


@contextlib.contextmanager
def torchscript_quietly():
    """Ignore TorchScript's own deprecation warnings inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.\w+` is deprecated", category=DeprecationWarning
        )
        yield


# sphinx_gallery_start_ignore
assert any(issubclass(w.category, DeprecationWarning) for w in caught), [str(w) for w in caught]
# sphinx_gallery_end_ignore

# %%
# Scripting reads the code, tracing records one run
# -------------------------------------------------
# :func:`torch.jit.script` compiles the Python source, so the loop survives.
# :func:`torch.jit.trace` calls the function once on an example input and records the
# tensor operations it sees; Python control flow is not a tensor operation, so the loop
# is unrolled for the example's two dimensions. Compare the two ``.code`` listings.
with torchscript_quietly():
    traced = torch.jit.trace(square_per_dim, torch.rand(3, 3))

print("--- scripted\n" + scripted.code)
print("--- traced on a 2-D example\n" + traced.code)

# sphinx_gallery_start_ignore
assert "for " in scripted.code and "for " not in traced.code
assert traced.code.count("torch.mul") == 2
# sphinx_gallery_end_ignore

# %%
# A trace can be silently wrong
# -----------------------------
# On a 3-D input the function should square three times. The trace squares twice, the
# number of times it saw, and gives no warning. Every input of 2s should become
# ``2 ** (2 ** 3) = 256``.
cube = torch.full((2, 2, 2), 2.0)
print("python:  ", square_per_dim(cube).flatten()[:4].tolist())
print("scripted:", scripted(cube).flatten()[:4].tolist())
print("traced:  ", traced(cube).flatten()[:4].tolist(), "<- wrong")

# sphinx_gallery_start_ignore
assert torch.equal(square_per_dim(cube), torch.full((2, 2, 2), 256.0))
assert torch.equal(scripted(cube), square_per_dim(cube))
assert torch.equal(traced(cube), torch.full((2, 2, 2), 16.0))
# sphinx_gallery_end_ignore

# %%
# Scripting needs types for everything that is not a tensor
# ---------------------------------------------------------
# TorchScript is statically typed and assumes an unannotated argument is a tensor. A
# float passed for it is rejected at call time. The annotation ``factor: float`` fixes it.


def scale(x, factor):
    return x * factor


def scale_annotated(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


with torchscript_quietly():
    scale_scripted = torch.jit.script(scale)
    scale_annotated_scripted = torch.jit.script(scale_annotated)
try:
    scale_scripted(torch.ones(2), 2.0)
except RuntimeError as error:
    print("unannotated:", str(error).splitlines()[0])
print("annotated:  ", scale_annotated_scripted(torch.ones(2), 2.0))

# sphinx_gallery_start_ignore
try:
    scale_scripted(torch.ones(2), 2.0)
except RuntimeError:
    pass
else:
    raise AssertionError("an unannotated float argument should have been rejected")
assert torch.equal(scale_annotated_scripted(torch.ones(2), 2.0), torch.full((2,), 2.0))
# sphinx_gallery_end_ignore

# %%
# Saving and loading a traced module
# ----------------------------------
# A traced :class:`torch.nn.Module` carries its code and its weights in one file that
# :func:`torch.jit.load` can open without the Python class, in Python or in C++. Both
# calls are deprecated as well; the replacement comes at the end of this page.
import tempfile
from pathlib import Path

model = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
example = torch.randn(8, 1)  # (batch, features)
workdir = Path(tempfile.mkdtemp())

with torchscript_quietly():
    traced_model = torch.jit.trace(model, example)
    torch.jit.save(traced_model, workdir / "model.pt")
    loaded = torch.jit.load(workdir / "model.pt")

print(type(loaded).__name__, f"{(workdir / 'model.pt').stat().st_size:,} bytes on disk")
print("same output as the original:", torch.equal(loaded(example), model(example)))

# sphinx_gallery_start_ignore
assert torch.equal(loaded(example), model(example))
# sphinx_gallery_end_ignore

# %%
# torch.compile handles the control flow
# --------------------------------------
# :func:`torch.compile` runs the Python function and captures the tensor operations
# too, but it records *guards*, the assumptions the capture relied on (here, the
# number of dimensions). When a call breaks a guard, it captures again. So it is right
# where the trace was wrong, at the price of one compilation per new case. A
# compilation costs from a tenth of a second (when Inductor finds the code in its
# on-disk cache) to several seconds; the timings below keep it apart from the cost of
# a call.
import time

from effpt.bench import format_seconds, time_callable

compiled = torch.compile(square_per_dim)
square = torch.full((2, 2), 2.0)
for x in (square, cube):
    start = time.perf_counter()
    result = compiled(x)
    first = time.perf_counter() - start
    later = time_callable(lambda x=x: compiled(x), device="cpu", repeats=5).median
    print(
        f"{x.dim()}-D input -> {result.flatten()[0].item():5.0f}   "
        f"first call (compiles) {format_seconds(first):>9}, later calls {format_seconds(later):>9}"
    )

# sphinx_gallery_start_ignore
assert torch.equal(compiled(square), square_per_dim(square))
assert torch.equal(compiled(cube), square_per_dim(cube))
# sphinx_gallery_end_ignore

# %%
# Graph breaks, and how to see them
# ---------------------------------
# When :func:`torch.compile` meets Python it cannot capture, such as a branch on a
# tensor's *value*, it splits the function into several graphs and runs the branch in
# Python between them: a *graph break*. The result stays correct but each break costs
# speed. ``torch._dynamo.explain`` reports them without compiling anything.


def normalise_if_long(x: torch.Tensor) -> torch.Tensor:
    norm = x.norm()
    if norm > 1:  # a Python decision on a tensor's value
        x = x / norm
    return 2 * x


def normalise_if_long_branchless(x: torch.Tensor) -> torch.Tensor:
    norm = x.norm()
    return 2 * torch.where(norm > 1, x / norm, x)  # the decision stays in the graph


for fn in (normalise_if_long, normalise_if_long_branchless):
    report = torch._dynamo.explain(fn)(torch.randn(5))
    print(f"{fn.__name__}: {report.graph_count} graph(s), {report.graph_break_count} break(s)")

# sphinx_gallery_start_ignore
assert torch._dynamo.explain(normalise_if_long)(torch.randn(5)).graph_break_count == 1
assert torch._dynamo.explain(normalise_if_long_branchless)(torch.randn(5)).graph_break_count == 0
for v in (torch.full((5,), 0.1), torch.full((5,), 3.0)):
    torch.testing.assert_close(normalise_if_long_branchless(v), normalise_if_long(v))
# sphinx_gallery_end_ignore

# %%
# ``fullgraph=True`` turns a graph break into an error, which is how to make sure a
# hot function compiles to a single graph. The error also says why the graph broke,
# and suggests the branchless rewrite used above.
try:
    torch.compile(normalise_if_long, fullgraph=True)(torch.randn(5))
except RuntimeError as error:  # torch._dynamo.exc.Unsupported
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    print(type(error).__name__ + ":", lines[0])
    print(next(line for line in lines if line.startswith("Hint:"))[:100], "...")

# sphinx_gallery_start_ignore
assert lines[0] == "Data-dependent branching", lines[:3]
# sphinx_gallery_end_ignore

# %%
# torch.export for deployment
# ---------------------------
# :func:`torch.export.export` captures a whole module ahead of time into an
# :class:`torch.export.ExportedProgram`: one graph of core ATen operators with the
# weights, no Python needed to run it, and no graph breaks allowed. Shapes are fixed
# to the example's unless a dimension is declared dynamic, as the batch is here.
from torch.export import Dim

exported = torch.export.export(
    model, (example,), dynamic_shapes={"input": {0: Dim("batch", min=1, max=1024)}}
)
ops = [str(node.target) for node in exported.graph.nodes if node.op == "call_function"]
print("operators:", ops)

three = torch.randn(3, 1)  # a batch size the export never saw
print("same output as the module:", torch.equal(exported.module()(three), model(three)))

# sphinx_gallery_start_ignore
assert ops == ["aten.linear.default", "aten.tanh.default", "aten.linear.default"], ops
assert torch.equal(exported.module()(three), model(three))
# sphinx_gallery_end_ignore

# %%
# :func:`torch.export.save` writes the program and its weights to one ``.pt2`` file;
# :func:`torch.export.load` reads it back without the model's Python class. The same
# file feeds AOTInductor for C++ deployment and ExecuTorch for phones.
torch.export.save(exported, workdir / "model.pt2")
reloaded = torch.export.load(workdir / "model.pt2")
print(f"{(workdir / 'model.pt2').stat().st_size:,} bytes on disk")
print("same output after loading:", torch.equal(reloaded.module()(three), model(three)))

# sphinx_gallery_start_ignore
assert torch.equal(reloaded.module()(three), model(three))
import shutil

shutil.rmtree(workdir)
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - TorchScript is deprecated: ``torch.jit.script``, ``trace``, ``save`` and ``load`` all
#   warn. Keep it only to read old models.
# - Tracing records one run: loops and branches that depend on the input are frozen
#   to the example's path, silently.
# - :func:`torch.compile` captures while running and re-captures when a guard fails, so
#   control flow stays correct; ``torch._dynamo.explain`` shows where graphs break.
# - :func:`torch.export.export` plus :func:`torch.export.save` replaces tracing and
#   ``torch.jit.save`` for deployment.
