"""
Move from TorchScript to torch.compile and torch.export
=======================================================

.. effpt-before-you-start::
   :learn: - Tell scripting from tracing, and catch a trace that is silently wrong on a
             new input.
           - Annotate the arguments TorchScript needs typed, and silence its deprecation
             warning by message and module.
           - Compile with ``torch.compile`` instead, time its compilations, and find graph
             breaks with ``torch._dynamo.explain`` and ``fullgraph=True``.
           - Export a module with a dynamic batch size using ``torch.export.export``, then
             save it and load it back.
   :read-first: :doc:`/explanations/timing` for how the later calls are timed.
   :needs: A CPU is enough; the page runs on the CPU even where there is a GPU.
           ``torch.compile`` needs a C++ compiler there, and Inductor keeps what it builds
           in an on-disk cache. The page writes ``model.pt`` and ``model.pt2`` to a new
           temporary folder and deletes it at the end.

TorchScript turned Python functions into graphs that ran without Python and could be
saved for deployment. It is deprecated now, but it still turns up in older code and in
saved models. This page shows the two ways of making TorchScript and the trap in one of
them, then does the same jobs the current way: :func:`torch.compile` to make code
faster and :func:`torch.export.export` to ship it.
"""

# %%
# TorchScript warns that it is deprecated
# ---------------------------------------
# The function below squares its input once per dimension: the number of loop
# iterations depends on the input. :func:`torch.jit.script` still compiles it. Recent
# releases of PyTorch also warn that TorchScript is deprecated, some with a
# ``DeprecationWarning``, others with a ``FutureWarning``; older ones stay silent.
#
# This site is built with deprecation warnings from torch turned into errors, so that
# no page teaches a deprecated API by accident; a page that calls TorchScript on
# purpose therefore catches its warning. This cell catches it and prints it. After
# that, a small context manager silences exactly these warnings, recognised by their
# message and by the module that raises them (``torch.jit``), whatever their category,
# so that any other warning still surfaces. The other pages that call TorchScript
# catch its warning the same way, by message and module, and link here.
import contextlib
import re
import warnings

import torch

from effpt.device import describe

torch.manual_seed(0)
device = torch.device("cpu")  # TorchScript and its replacements are shown on the CPU
print(describe(device))

TORCHSCRIPT_DEPRECATION = r"`torch\.jit\.\w+` is deprecated"


def square_per_dim(x: torch.Tensor) -> torch.Tensor:
    for _ in range(x.dim()):
        x = x * x
    return x


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scripted = torch.jit.script(square_per_dim)
deprecations = [w for w in caught if re.match(TORCHSCRIPT_DEPRECATION, str(w.message))]
for w in deprecations[:1]:
    print(f"{w.category.__name__}: {w.message}")
if not deprecations:
    print(f"torch {torch.__version__} scripts it without a deprecation warning")


@contextlib.contextmanager
def torchscript_quietly():
    """Ignore TorchScript's own deprecation warnings, of any category, inside the block."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TORCHSCRIPT_DEPRECATION, module=r"torch\.jit")
        yield


# sphinx_gallery_start_ignore
assert len(deprecations) == len(caught), [str(w.message) for w in caught]
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
# Scripting needs types for arguments that are not tensors
# --------------------------------------------------------
# TorchScript is statically typed. It infers the types of local variables, but it
# assumes that an unannotated argument is a tensor, so a list passed for it is
# rejected at call time. Older code therefore annotates its arguments with
# :mod:`typing`'s ``List[T]``, ``Tuple[...]`` (a fixed number of elements, each of a
# fixed type) and ``Optional[T]`` (a ``T`` or ``None``).
# An ``Optional`` must be *refined* before use: inside ``if scale is not None:``
# TorchScript knows that ``scale`` is a ``float``.


def total_unannotated(xs, scale=None):
    result = torch.zeros(())
    for x in xs:
        result = result + x.sum()
    return result if scale is None else result * scale


def total(xs: list[torch.Tensor], scale: float | None = None) -> tuple[torch.Tensor, int]:
    result = torch.zeros(())
    for x in xs:
        result = result + x.sum()
    if scale is not None:  # refines Optional[float] to float
        result = result * scale
    return result, len(xs)


with torchscript_quietly():
    total_unannotated_scripted = torch.jit.script(total_unannotated)
    total_scripted = torch.jit.script(total)
pair = [torch.ones(2), torch.ones(3)]
try:
    total_unannotated_scripted(pair)
except RuntimeError as error:
    print("unannotated:", str(error).splitlines()[0])
print("annotated:  ", total_scripted(pair), total_scripted(pair, 0.5))

# sphinx_gallery_start_ignore
try:
    total_unannotated_scripted(pair)
except RuntimeError:
    pass
else:
    raise AssertionError("an unannotated list argument should have been rejected")
assert total_scripted(pair) == (torch.tensor(5.0), 2)
assert total_scripted(pair, 0.5) == (torch.tensor(2.5), 2)


def total_builtin(xs: list[torch.Tensor], scale: float | None = None) -> tuple[torch.Tensor, int]:
    return total(xs, scale)


with torchscript_quietly():
    assert torch.jit.script(total_builtin)(pair) == (torch.tensor(5.0), 2)
# sphinx_gallery_end_ignore

# %%
# The torch versions this site supports also read the built-in spellings
# ``list[torch.Tensor]``, ``tuple[torch.Tensor, int]`` and ``float | None``; the
# :mod:`typing` names are what you will meet in older code. ``torch.compile`` needs
# none of this: it runs the Python code and sees the values.

# %%
# Saving and loading a traced module
# ----------------------------------
# A traced :class:`torch.nn.Module` carries its code and its weights in one file that
# :func:`torch.jit.load` can open without the Python class, in Python or in C++. Both
# calls are part of the deprecated TorchScript too (recent releases warn on them); the
# replacement comes in "torch.export for deployment", below.
import tempfile
from pathlib import Path

model = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
example = torch.randn(8, 1)  # (batch, features)
scratch = tempfile.TemporaryDirectory()  # deleted at the end of the page
workdir = Path(scratch.name)

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
# number of dimensions). When a call breaks a guard, it captures and compiles again.
# So it is right where the trace was wrong, at the price of one compilation per new
# case. Which call compiles again is decided here by Dynamo, the capturing half of
# :func:`torch.compile`, whatever backend then builds the graph; so the cells below use
# ``backend="eager"``, which runs each captured graph as plain PyTorch and builds no
# code, and the cell after the figure times a build by Inductor, the default backend.
#
# Below, inputs of one to three dimensions, all 2s: the first call with each new
# number of dimensions compiles, and is timed apart from the calls after it, which
# :func:`effpt.bench.time_callable` times (how: :doc:`/explanations/timing`). Predict
# first: does a compilation cost more than ten later calls on your machine?
import time

from effpt.bench import format_seconds, time_callable

compiled = torch.compile(square_per_dim, backend="eager")  # Dynamo captures, builds no code
inputs = {d: torch.full((2,) * d, 2.0) for d in (1, 2, 3)}
first_calls, later_timings, later_calls = {}, {}, {}
for d, x in inputs.items():
    start = time.perf_counter()
    result = compiled(x)
    first_calls[d] = time.perf_counter() - start
    later_timings[d] = time_callable(lambda x=x: compiled(x), device=device, budget_s=0.2)
    later_calls[d] = later_timings[d].median
    print(
        f"{d}-D input -> {result.flatten()[0].item():6.0f}   "
        f"first call (compiles) {format_seconds(first_calls[d]):>9}, "
        f"later calls {format_seconds(later_calls[d]):>9}"
    )

from effpt.expect import expect

# The case whose first call stood least above its later calls, with their quartiles.
d = min(inputs, key=lambda d: first_calls[d] / later_calls[d])
t = later_timings[d]
expect(
    "every new case's first call (a compilation) costs more than 10 later calls",
    (first_calls[d] / t.median, first_calls[d] / t.q3, first_calls[d] / t.q1),
    above=10,
    device=device,
)

# sphinx_gallery_start_ignore
for x in inputs.values():
    assert torch.equal(compiled(x), square_per_dim(x))
# sphinx_gallery_end_ignore

# %%
# On the left, how many times each version squared its input: the trace repeats the
# two squarings of its 2-D example for every input, the others follow the input. On
# the right, what each new case cost Dynamo's capture the first time, against what a
# call costs afterwards.
import math

import matplotlib.pyplot as plt

versions = {
    "Python": square_per_dim,
    "torch.jit.script": scripted,
    "torch.jit.trace (2-D example)": traced,
    "torch.compile": compiled,
}
dims = list(inputs)
fig, (ax_sq, ax_t) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for i, (name, fn) in enumerate(versions.items()):
    counts = [math.log2(math.log2(fn(inputs[d]).flatten()[0].item())) for d in dims]
    shifted = [d + 0.06 * (i - 1.5) for d in dims]  # side by side where they coincide
    ax_sq.plot(shifted, counts, marker="osx^"[i], label=name)
ax_sq.set(xlabel="dimensions of the input", ylabel="squarings applied", xticks=dims)
ax_sq.set(yticks=dims, title="Control flow: who follows the input")
ax_sq.legend(loc="upper left", fontsize="small")
ax_t.semilogy(dims, [first_calls[d] for d in dims], "o-", label="first call (compiles)")
ax_t.semilogy(dims, [later_calls[d] for d in dims], "s-", label="later calls")
ax_t.set(xlabel="dimensions of the input", ylabel="time (s)", xticks=dims)
ax_t.set(title="torch.compile: one compilation per new case")
ax_t.legend(loc="center right", fontsize="small")
plt.show()

# %%
# Now Inductor, the default backend, which generates and builds code for each graph.
# How long that takes depends on more than the function: the first build in a process
# also sets up the compiler, and code never built on this machine is built from
# scratch. Inductor keeps what it built in an on-disk cache, across processes.
# :func:`torch.compiler.reset` makes this process forget every compiled function;
# compiling the 1-D case again then needs the capture and a cache lookup, not a build.
# How much that saves depends on what the first build had to do, which differs from
# run to run and from machine to machine: the lines below print both, and the
# expectation says whether compiling again was faster here.
torch.compiler.reset()
built = torch.compile(square_per_dim)  # Inductor
start = time.perf_counter()
built(inputs[1])
first_build = time.perf_counter() - start
torch.compiler.reset()
recompiled = torch.compile(square_per_dim)
start = time.perf_counter()
recompiled(inputs[1])
again = time.perf_counter() - start
print(f"1-D case, first Inductor build on this page: {format_seconds(first_build)}")
print(f"1-D case, compiled again after the reset:    {format_seconds(again)}")
expect(
    "compiling the 1-D case again after the reset is faster than the first time",
    first_build / again,
    above=1.0,
    device=device,
)

# sphinx_gallery_start_ignore
assert torch.equal(recompiled(inputs[1]), square_per_dim(inputs[1]))
# sphinx_gallery_end_ignore

# %%
# Graph breaks, and how to see them
# ---------------------------------
# When :func:`torch.compile` meets Python it cannot capture, such as a branch on a
# tensor's *value*, it splits the function into several graphs and runs the branch in
# Python between them: a *graph break*. The result stays correct, but each break
# costs a return to Python and leaves the compiler smaller pieces to optimise.
# ``torch._dynamo.explain`` reports them; it captures the graphs but does not compile them.


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
# hot function compiles to a single graph. The error says why the graph broke; recent
# releases add hints, such as the branchless rewrite used above.
import textwrap

try:
    torch.compile(normalise_if_long, fullgraph=True)(torch.randn(5))
except RuntimeError as error:  # torch._dynamo.exc.Unsupported
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    print(type(error).__name__ + ":", lines[0])
    hints = [line for line in lines if line.startswith("Hint:")]
    print(textwrap.fill(hints[0], 88) if hints else "(no hint in this release's message)")
else:
    raise AssertionError("fullgraph=True should have refused the graph break")

# %%
# torch.export for deployment
# ---------------------------
# :func:`torch.export.export` captures a whole module ahead of time into an
# :class:`torch.export.ExportedProgram`: one graph of ATen operators with the weights,
# which runtimes without Python can execute, and no graph breaks allowed. Shapes are
# fixed to the example's unless a dimension is declared dynamic, as the batch is here.
# The graph keeps composite operators such as ``linear`` (printed below);
# :meth:`~torch.export.ExportedProgram.run_decompositions` lowers them to the smaller
# core ATen set that backends implement (``linear`` becomes ``permute`` and ``addmm``).
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
# :func:`torch.export.load` reads it back without the model's Python class. An
# exported program, fresh or loaded, is what AOTInductor compiles for C++ deployment
# and what ExecuTorch lowers for phones.
torch.export.save(exported, workdir / "model.pt2")
reloaded = torch.export.load(workdir / "model.pt2")
print(f"{(workdir / 'model.pt2').stat().st_size:,} bytes on disk")
print("same output after loading:", torch.equal(reloaded.module()(three), model(three)))

# sphinx_gallery_start_ignore
assert torch.equal(reloaded.module()(three), model(three))
# sphinx_gallery_end_ignore

# %%
# The page is done with its files; it deletes their folder:
scratch.cleanup()

# sphinx_gallery_start_ignore
assert not workdir.exists()
# sphinx_gallery_end_ignore

# %%
# Summary
# -------
# - TorchScript is deprecated (recent releases warn on ``torch.jit.script``, ``trace``,
#   ``save`` and ``load``); keep it only to read old models, and silence its warning by
#   message and module, not by category, which has changed between releases.
#
# - Tracing records one run: loops and branches that depend on the input are frozen
#   to the example's path, silently. Scripting needs a type for every argument that
#   is not a tensor (``List``, ``Tuple``, ``Optional`` in older code).
#
# - :func:`torch.compile` captures while running and compiles again when a guard fails,
#   so control flow stays correct; each new case costs a compilation, which Inductor's
#   on-disk cache can shorten when it already holds the code. ``torch._dynamo.explain`` shows
#   where graphs break.
#
# - :func:`torch.export.export` plus :func:`torch.export.save` replaces tracing and
#   ``torch.jit.save`` for deployment.
