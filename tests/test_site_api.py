"""The API reference's hooks (docs/_ext/effpt_site/api.py): a minigallery under each effpt
function and class, and other projects' names as plain code when a build is offline."""

from __future__ import annotations

from pathlib import Path
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


EFFPT_MODULES = [
    "effpt",
    "effpt.device",
    "effpt.data",
    "effpt.data.images",
    "effpt.records",
]


@pytest.mark.parametrize("name", EFFPT_MODULES)
def test_viewcode_finds_an_effpt_module_where_importing_it_would(name):
    from sphinx.pycode import ModuleAnalyzer

    imported, _ = ModuleAnalyzer.get_module_source(name)  # Sphinx's way: imports it
    assert api.module_file(name) == Path(imported)


def test_a_module_not_of_effpt_is_left_to_sphinx():
    assert api.module_file("json") is None
    assert api.module_file("effpt.no_such_module") is None


def test_viewcode_asks_for_effpt_sources_without_importing_torch(imports_torch):
    code = (
        "import types\n"
        "from sphinx.ext import viewcode\n"
        "from effpt_site import api\n"
        "events = types.SimpleNamespace(emit_firstresult=lambda *a: None)\n"
        "app = types.SimpleNamespace(events=events)\n"
        "api.setup(types.SimpleNamespace(add_config_value=lambda *a: None, connect=lambda *a: None))\n"
        "for name in ('effpt.device', 'effpt.data.images', 'effpt.amp'):\n"
        "    assert viewcode.get_module_filename(app, name).is_file()"
    )
    assert not imports_torch(code)
