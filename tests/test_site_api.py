"""The API reference's hooks (docs/_ext/effpt_site/api.py): a minigallery under each effpt
function and class, and other projects' names as plain code when a build is offline."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from docutils import nodes

from effpt_site import api


@pytest.mark.parametrize("what", ["function", "class"])
def test_an_effpt_function_or_class_gets_the_pages_that_use_it(what):
    lines = ["Time a function."]
    api.add_minigallery(None, what, "effpt.bench.compare", None, {}, lines)
    assert lines == [
        "Time a function.",
        "",
        ".. minigallery:: effpt.bench.compare",
        "   :add-heading: Pages that use ``compare``",
        "   :heading-level: ^",
        "",
    ]


@pytest.mark.parametrize(
    ("what", "name"),
    [
        ("module", "effpt.bench"),  # a module's page lists its members, not pages
        ("method", "effpt.bench.Timer.run"),
        ("attribute", "effpt.bench.DEFAULT"),
        ("function", "torch.compile"),  # another project's object
    ],
)
def test_anything_else_is_left_as_written(what, name):
    lines = ["Docstring."]
    api.add_minigallery(None, what, name, None, {}, lines)
    assert lines == ["Docstring."]


def _app(links: bool):
    return SimpleNamespace(config=SimpleNamespace(effpt_api_links=links))


def _reference(target: str, domain: str = "py"):
    return nodes.reference(refdomain=domain, reftarget=target)


@pytest.mark.parametrize(
    "target", ["torch.Tensor", "~torch.nn.Module", "numpy.ndarray", "pathlib.Path", "int"]
)
def test_offline_other_projects_names_become_plain_code(target):
    code = nodes.literal(text=target)
    assert api.offline_reference(_app(False), None, _reference(target), code) is code


@pytest.mark.parametrize(
    ("links", "target", "domain"),
    [
        (True, "torch.Tensor", "py"),  # online: the inventories resolve it, or the build says
        (False, "effpt.bench.compare", "py"),  # effpt's own names must resolve
        (False, "somelib.Thing", "py"),  # a project the site does not name stays an error
        (False, "torch.Tensor", "std"),  # only Python references
    ],
)
def test_everything_else_stays_a_missing_reference(links, target, domain):
    code = nodes.literal(text=target)
    assert api.offline_reference(_app(links), None, _reference(target, domain), code) is None
