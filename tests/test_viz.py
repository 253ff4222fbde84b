"""effpt.viz: the backward graph read from autograd, and its drawing."""

from __future__ import annotations

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from effpt import viz


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def leaves(n: int = 2, shape: tuple[int, ...] = (5,)) -> list[torch.Tensor]:
    return [torch.ones(shape, requires_grad=True) for _ in range(n)]


def test_sum_of_product_has_known_nodes_and_edges():
    a, b = leaves()
    c = (a + 1) * b
    graph = viz.backward_graph(c, names={"a": a, "b": b, "c": c})
    kinds = sorted((n.kind, n.name or n.op) for n in graph.nodes)
    assert kinds == [("leaf", "a"), ("leaf", "b"), ("op", "AddBackward0"), ("op", "c")]
    by_name = {n.name or n.op: n.key for n in graph.nodes}
    assert set(graph.edges) == {
        (by_name["a"], by_name["AddBackward0"]),
        (by_name["AddBackward0"], by_name["c"]),
        (by_name["b"], by_name["c"]),
    }
    assert graph.root == by_name["c"]
    assert graph.node(graph.root).op == "MulBackward0"


def test_names_land_on_their_own_nodes():
    # Before torch 2.15 the Python object of a backward node lives only while something
    # refers to it, so ``id(t.grad_fn)`` taken and dropped for one tensor can be reused by
    # the next tensor's node: names keyed that way collide or land on the wrong node.
    (x,) = leaves(1)
    names, y = {}, x
    for i in range(8):
        y = y * 2 if i % 2 else y + 1
        names[f"y{i}"] = y
    graph = viz.backward_graph(y, names=names)
    inputs = {dst: src for src, dst in graph.edges}
    key, walked = graph.root, []
    while graph.node(key).kind == "op":  # from the output back to the leaf
        walked.append((graph.node(key).name, graph.node(key).op))
        key = inputs[key]
    expected = [(f"y{i}", "MulBackward0" if i % 2 else "AddBackward0") for i in range(8)]
    assert walked == expected[::-1]


def test_the_same_tensor_gives_the_same_graph():
    a, b = leaves()
    s = a + 1
    c = s * b
    names = {"a": a, "b": b, "s": s, "c": c}
    first = viz.backward_graph(c, names=names)
    del_and_rebuild = [viz.backward_graph(c, names=names) for _ in range(3)]
    assert all(graph == first for graph in del_and_rebuild)
    assert {n.name for n in first.nodes} == {"a", "b", "s", "c"}


def test_two_names_for_one_node_are_both_shown():
    (a,) = leaves(1, shape=(4,))
    low, high = (a * 2).chunk(2)  # two outputs of one SplitBackward0 node
    graph = viz.backward_graph(low + high, names={"low": low, "high": high})
    assert {n.op: n.name for n in graph.nodes if n.kind == "op"}.get("SplitBackward0") == (
        "low, high"
    )


def test_detach_removes_the_branch_behind_it():
    a, b = leaves()
    graph = viz.backward_graph((a + 1).detach() * b, names={"a": a, "b": b})
    assert sorted(n.name or n.op for n in graph.nodes) == ["MulBackward0", "b"]
    assert len(graph.edges) == 1


def test_lost_leaf_shows_a_copy_node_and_an_unnamed_leaf():
    a = torch.randn(5, requires_grad=True).double()  # a is now the copy, not the leaf
    (b,) = leaves(1)
    graph = viz.backward_graph((a + 1) * b, names={"a": a, "b": b})
    ops = {n.op: n for n in graph.nodes}
    assert ops["ToCopyBackward0"].name == "a"
    unnamed = [n for n in graph.nodes if n.kind == "leaf" and n.name is None]
    assert len(unnamed) == 1
    assert unnamed[0].shape == (5,)
    assert "unnamed leaf" in unnamed[0].label


def test_a_leaf_used_twice_is_one_node_with_one_edge():
    (a,) = leaves(1)
    graph = viz.backward_graph(a * a)
    assert len(graph.nodes) == 2
    assert len(graph.edges) == 1


def test_a_leaf_on_its_own_is_a_one_node_graph():
    (a,) = leaves(1, shape=())
    graph = viz.backward_graph(a, names={"a": a})
    assert [(n.kind, n.name, n.shape) for n in graph.nodes] == [("leaf", "a", ())]
    assert graph.edges == ()
    assert graph.nodes[0].label == "a\n(scalar)"


def test_custom_function_nodes_are_named_after_the_class():
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ARG004
            return 2 * x

        @staticmethod
        def backward(ctx, grad):  # noqa: ARG004
            return 2 * grad

    (a,) = leaves(1)
    graph = viz.backward_graph(Double.apply(a))
    assert graph.node(graph.root).op == "DoubleBackward"


def test_second_order_graph_is_readable():
    (a,) = leaves(1)
    (grad,) = torch.autograd.grad((a**4).sum(), a, create_graph=True)
    graph = viz.backward_graph(grad)
    assert any(n.kind == "leaf" for n in graph.nodes)
    assert len(graph.nodes) >= 3


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        ([1.0, 2.0], TypeError, "tensor must be a torch.Tensor, got list"),
        (torch.ones(3), ValueError, "does not require grad"),
    ],
)
def test_bad_tensor_raises_a_clear_error(bad, error, match):
    with pytest.raises(error, match=match):
        viz.backward_graph(bad)
    with pytest.raises(error, match=match):
        viz.autograd_graph(bad)


@pytest.mark.parametrize("names", [["a"], {"a": 1.0}, {1: torch.ones(1)}])
def test_bad_names_raise_type_error(names):
    (a,) = leaves(1)
    with pytest.raises(TypeError, match="names must"):
        viz.backward_graph(a * 2, names=names)


def test_unknown_node_key_raises_key_error():
    (a,) = leaves(1)
    graph = viz.backward_graph(a * 2)
    with pytest.raises(KeyError, match="node keys"):
        graph.node(-1)


def test_figure_has_one_box_per_node_and_one_arrow_per_edge():
    a, b = leaves()
    fig = viz.autograd_graph((a + 1) * b, names={"a": a, "b": b}, title="c")
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == [
        "AddBackward0",
        "MulBackward0",
        "a\n(5)",
        "b\n(5)",
    ]
    assert len(ax.patches) == 3
    assert ax.get_title() == "c"


def test_figure_draws_leaves_above_the_output():
    a, b = leaves()
    fig = viz.autograd_graph((a + 1) * b, names={"a": a, "b": b})
    y = {t.get_text(): t.get_position()[1] for t in fig.axes[0].texts}
    assert y["a\n(5)"] > y["AddBackward0"] > y["MulBackward0"]


def test_drawing_into_given_axes_returns_their_figure():
    fig, (left, right) = plt.subplots(1, 2)
    (a,) = leaves(1)
    assert viz.autograd_graph(a.exp(), ax=right) is fig
    assert not left.texts
    assert len(right.texts) == 2


def test_bad_title_raises_type_error():
    (a,) = leaves(1)
    with pytest.raises(TypeError, match="title must be a str or None, got int"):
        viz.autograd_graph(a * 2, title=3)


UNARY = {
    "exp": torch.exp,
    "sin": torch.sin,
    "tanh": torch.tanh,
    "neg": torch.neg,
    "double": lambda t: t * 2,
}
BINARY = {"add": torch.add, "mul": torch.mul, "sub": torch.sub}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(UNARY)), min_size=1, max_size=12))
def test_a_chain_of_unary_ops_is_a_path(ops):
    (x,) = leaves(1, shape=(3,))
    y = x
    for op in ops:
        y = UNARY[op](y)
    graph = viz.backward_graph(y, names={"x": x})
    assert len(graph.nodes) == len(ops) + 1
    assert len(graph.edges) == len(ops)
    heights = sorted(y for _, y in viz._layout(graph).values())
    assert heights == [float(i) for i in range(len(ops) + 1)]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(BINARY)), st.integers(0, 100), st.integers(0, 100)),
        min_size=1,
        max_size=10,
    )
)
def test_random_expressions_lay_out_with_every_edge_pointing_down(steps):
    values = leaves(3, shape=(2,))
    for op, i, j in steps:
        values.append(BINARY[op](values[i % len(values)], values[j % len(values)]))
    graph = viz.backward_graph(values[-1])
    pos = viz._layout(graph)
    assert set(pos) == {n.key for n in graph.nodes}
    assert all(pos[src][1] > pos[dst][1] for src, dst in graph.edges)
    assert pos[graph.root][1] == 0.0
    reached, frontier = {graph.root}, [graph.root]  # every node feeds the root
    while frontier:
        key = frontier.pop()
        for src, dst in graph.edges:
            if dst == key and src not in reached:
                reached.add(src)
                frontier.append(src)
    assert reached == set(pos)
    assert len({pos[k] for k in pos}) == len(pos)  # no two boxes on the same spot
