"""Plotting helpers that several pages share.

:func:`autograd_graph` draws the backward graph that autograd recorded behind a
tensor, with matplotlib alone: no Graphviz binary to install. :func:`backward_graph`
returns the same graph as plain data, which is what the drawing is made from and
what tests can check.

The graph is read from ``tensor.grad_fn`` and each node's ``next_functions``. An
operation node is one backward function (``MulBackward0``); a leaf node is a tensor
that autograd accumulates a gradient into (its ``AccumulateGrad`` node). Edges point
the way the forward computation ran: from inputs to the operation that used them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

if TYPE_CHECKING:  # pragma: no cover
    import matplotlib.axes
    import matplotlib.figure

__all__ = ["BackwardGraph", "GraphNode", "autograd_graph", "backward_graph"]

_COLOURS = {"leaf": "#cfe2f3", "op": "#eeeeee", "output": "#d9ead3"}


@dataclass(frozen=True)
class GraphNode:
    """One node of a :class:`BackwardGraph`.

    ``key`` numbers the node (0 is the root); ``kind`` is ``"leaf"`` for a tensor that
    receives a gradient and ``"op"`` for a backward function; ``name`` is the name given for it, if any; ``op`` is the
    backward function's class name (``"AccumulateGrad"`` for leaves); ``shape`` is the
    leaf's shape (empty for operations).
    """

    key: int
    kind: Literal["leaf", "op"]
    op: str
    name: str | None = None
    shape: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """The text drawn in the node's box."""
        if self.kind == "leaf":
            shape = "×".join(str(s) for s in self.shape) or "scalar"
            return f"{self.name}\n({shape})" if self.name else f"unnamed leaf\n({shape})"
        return f"{self.name} = {self.op}" if self.name else self.op


@dataclass(frozen=True)
class BackwardGraph:
    """The backward graph behind a tensor: nodes, edges ``(input, user)`` and the root.

    Nodes are keyed ``0, 1, ...`` in the order the traversal from the root met them, so
    reading the same tensor twice gives equal graphs.
    """

    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[int, int], ...]
    root: int

    def node(self, key: int) -> GraphNode:
        """The node with ``key``."""
        for node in self.nodes:
            if node.key == key:
                return node
        msg = f"key must be one of the graph's node keys, got {key}"
        raise KeyError(msg)


def _check_names(names: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    if names is None:
        return {}
    if not isinstance(names, Mapping):
        msg = f"names must be a mapping of str to Tensor, got {type(names).__name__}"
        raise TypeError(msg)
    for name, value in names.items():
        if not isinstance(name, str) or not isinstance(value, torch.Tensor):
            msg = (
                f"names must map str to Tensor, got {name!r}: {type(value).__name__}"
                " (expected e.g. names={'a': a})"
            )
            raise TypeError(msg)
    return dict(names)


def backward_graph(
    tensor: torch.Tensor, names: Mapping[str, torch.Tensor] | None = None
) -> BackwardGraph:
    """Read the backward graph that autograd recorded behind ``tensor``.

    Parameters
    ----------
    tensor
        A tensor that requires grad: a computed tensor, or a leaf on its own.
    names
        Optional labels, e.g. ``{"a": a, "c": c}``. A leaf is matched by identity with
        the tensor its ``AccumulateGrad`` node holds; a computed tensor labels the
        operation that produced it (its ``grad_fn``). Outputs of one operation (the
        parts of a ``chunk``) share its node, which then shows all their names joined
        by ", "; so does a leaf given several names. A name whose tensor is not in the graph (cut off by ``detach``, say) is
        not drawn.

    Returns
    -------
    BackwardGraph
        Operation and leaf nodes, edges from each input to the operation using it
        (inputs that do not require grad are left out), and the key of the root.

    Examples
    --------
    >>> a = torch.ones(5, requires_grad=True)
    >>> b = torch.ones(5, requires_grad=True)
    >>> graph = backward_graph((a + 1) * b, names={"a": a, "b": b})
    >>> len(graph.nodes), len(graph.edges)
    (4, 3)
    >>> sorted(node.name or node.op for node in graph.nodes)
    ['AddBackward0', 'MulBackward0', 'a', 'b']
    >>> graph.root, graph.node(graph.root).op
    (0, 'MulBackward0')
    >>> len(backward_graph((a + 1).detach() * b).nodes)  # detach cuts a's branch off
    2
    >>> backward_graph(torch.ones(3))
    Traceback (most recent call last):
    ...
    ValueError: tensor does not require grad, so autograd recorded no graph behind it
    """
    if not isinstance(tensor, torch.Tensor):
        msg = f"tensor must be a torch.Tensor, got {type(tensor).__name__}"
        raise TypeError(msg)
    if not tensor.requires_grad:
        msg = "tensor does not require grad, so autograd recorded no graph behind it"
        raise ValueError(msg)
    labels = _check_names(names)
    leaf_names: dict[int, str] = {}
    for n, t in labels.items():
        if t.grad_fn is None:  # a leaf given several names shows them all
            leaf_names[id(t)] = f"{leaf_names[id(t)]}, {n}" if id(t) in leaf_names else n
    # Until torch 2.15 the Python object of a backward node exists only while something
    # refers to it: ``t.grad_fn`` makes a new one after the last was freed, possibly at an
    # address (``id``) that another node's object had. Holding every object we look at for
    # the whole traversal keeps each node's object, and so its ``id``, unique; node keys
    # are then numbered in traversal order, so the graph never depends on addresses.
    named_fns = [(t.grad_fn, n) for n, t in labels.items() if t.grad_fn is not None]
    op_names: dict[int, list[str]] = {}
    for fn, name in named_fns:
        op_names.setdefault(id(fn), []).append(name)

    if tensor.grad_fn is None:  # a leaf on its own
        leaf = GraphNode(
            0, "leaf", "AccumulateGrad", leaf_names.get(id(tensor)), tuple(tensor.shape)
        )
        return BackwardGraph((leaf,), (), 0)

    root = tensor.grad_fn
    keys: dict[int, int] = {id(root): 0}  # id of a node object -> its key
    alive: list[Any] = [root]  # every node object seen, held until the traversal ends
    nodes: list[GraphNode] = []
    edges: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        fn = stack.pop()
        key = keys[id(fn)]
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            nodes.append(
                GraphNode(
                    key,
                    "leaf",
                    "AccumulateGrad",
                    leaf_names.get(id(variable)),
                    tuple(variable.shape),
                )
            )
        else:
            name = ", ".join(op_names.get(id(fn), [])) or None
            nodes.append(GraphNode(key, "op", _op_name(fn), name))
        for child, _ in fn.next_functions:
            if child is None:
                continue
            if id(child) not in keys:
                keys[id(child)] = len(alive)
                alive.append(child)
                stack.append(child)
            edge = (keys[id(child)], key)
            if edge not in edges:
                edges.append(edge)
    return BackwardGraph(tuple(sorted(nodes, key=lambda n: n.key)), tuple(edges), 0)


def _op_name(fn: Any) -> str:
    name = fn.name() if callable(getattr(fn, "name", None)) else type(fn).__name__
    return name.rsplit("::", 1)[-1]


def _layout(graph: BackwardGraph) -> dict[int, tuple[float, float]]:
    """Layered positions: the root at the bottom, each node one row above its user.

    A node's row is its longest distance from the root, so every edge points down.
    Within a row, nodes are ordered by the mean position of the nodes they feed (one
    barycentre pass, enough for the small graphs pages draw).
    """
    users: dict[int, list[int]] = {n.key: [] for n in graph.nodes}
    inputs: dict[int, list[int]] = {n.key: [] for n in graph.nodes}
    for src, dst in graph.edges:
        users[src].append(dst)
        inputs[dst].append(src)
    depth = {graph.root: 0}
    frontier = [graph.root]
    while frontier:  # longest path on a DAG by relaxation; graphs here are small
        nxt = []
        for key in frontier:
            for src in inputs[key]:
                if depth.get(src, -1) < depth[key] + 1:
                    depth[src] = depth[key] + 1
                    nxt.append(src)
        frontier = nxt
    rows: dict[int, list[int]] = {}
    for key in (n.key for n in graph.nodes):
        rows.setdefault(depth[key], []).append(key)
    x: dict[int, float] = {}
    for row in sorted(rows):
        keys = rows[row]
        if row > 0:
            keys.sort(key=lambda k: sum(x[u] for u in users[k]) / max(len(users[k]), 1))
        width = len(keys)
        for i, key in enumerate(keys):
            x[key] = i - (width - 1) / 2
    return {key: (x[key], float(depth[key])) for key in x}


def autograd_graph(
    tensor: torch.Tensor,
    names: Mapping[str, torch.Tensor] | None = None,
    *,
    ax: matplotlib.axes.Axes | None = None,
    title: str | None = None,
) -> matplotlib.figure.Figure:
    """Draw the backward graph behind ``tensor`` with matplotlib and return the figure.

    Leaves are blue boxes labelled with their name (or "unnamed leaf") and shape,
    operations grey boxes named after their backward function, and the operation that
    produced ``tensor`` is green. Arrows run from inputs to the operation using them.

    Parameters
    ----------
    tensor, names
        As for :func:`backward_graph`.
    ax
        Axes to draw into; by default a new figure sized to the graph is made.
    title
        Title of the axes.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the drawing.

    Examples
    --------
    >>> a = torch.ones(5, requires_grad=True)
    >>> b = torch.ones(5, requires_grad=True)
    >>> fig = autograd_graph((a + 1) * b, names={"a": a, "b": b}, title="c = (a + 1) * b")
    >>> sorted(text.get_text() for text in fig.axes[0].texts)
    ['AddBackward0', 'MulBackward0', 'a\\n(5)', 'b\\n(5)']
    >>> fig.axes[0].get_title()
    'c = (a + 1) * b'
    >>> import matplotlib.pyplot as plt
    >>> plt.close(fig)
    """
    graph = backward_graph(tensor, names)
    if title is not None and not isinstance(title, str):
        msg = f"title must be a str or None, got {type(title).__name__}"
        raise TypeError(msg)
    import matplotlib.pyplot as plt  # noqa: PLC0415  (matplotlib is only needed to draw)
    from matplotlib.patches import FancyArrowPatch  # noqa: PLC0415

    pos = _layout(graph)
    width = max(x for x, _ in pos.values()) - min(x for x, _ in pos.values()) + 1
    height = max(y for _, y in pos.values()) + 1
    if ax is None:
        fig, ax = plt.subplots(
            figsize=(max(3.0, 2.2 * width), max(2.0, 1.1 * height + 0.6)), layout="constrained"
        )
    else:
        fig = ax.figure
    for src, dst in graph.edges:
        arrow = FancyArrowPatch(
            pos[src],
            pos[dst],
            arrowstyle="-|>",
            mutation_scale=12,
            color="0.35",
            shrinkA=14,
            shrinkB=14,
        )
        ax.add_patch(arrow)
    for node in graph.nodes:
        kind = "output" if node.key == graph.root and node.kind == "op" else node.kind
        ax.text(
            *pos[node.key],
            node.label,
            ha="center",
            va="center",
            fontsize=9,
            bbox={"boxstyle": "round,pad=0.4", "facecolor": _COLOURS[kind], "edgecolor": "0.3"},
        )
    xs = [x for x, _ in pos.values()]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(-0.6, height - 0.4)
    ax.set_axis_off()
    if title is not None:
        ax.set_title(title, fontsize=10)
    return fig
