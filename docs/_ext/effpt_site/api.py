"""The API reference: minigalleries under effpt's objects, and offline API names.

Under every public effpt function and class, a minigallery lists the pages that use
it. When the other projects' inventories cannot be fetched (an offline build), their
names are rendered as plain code instead of failing the nitpicky build.
"""

from __future__ import annotations

import builtins

from docutils import nodes

#: Modules whose objects live in other projects' docs.
EXTERNAL_ROOTS = frozenset(
    [
        "torch",
        "numpy",
        "np",
        "matplotlib",
        "collections",
        "typing",
        "pathlib",
        "os",
        "random",
        "threading",
        "warnings",
        "dataclasses",
        "statistics",
        "json",
        "tarfile",
        "multiprocessing",
        "io",
        "PIL",
        "time",
        "timeit",
        "contextlib",
        "concurrent",
        "tempfile",
        "re",
        "functools",
        "itertools",
        "math",
        "subprocess",
        "socket",
        "sys",
        "inspect",
        "copy",
        "pickle",
        "datetime",
        "types",
    ]
)
BUILTIN_NAMES = frozenset(dir(builtins))


def add_minigallery(app, what, name, obj, options, lines):  # noqa: ARG001  (autodoc's signature)
    """autodoc-process-docstring hook: list the pages that use an effpt object."""
    if what in {"function", "class"} and name.startswith("effpt."):
        lines += [
            "",
            f".. minigallery:: {name}",
            f"   :add-heading: Pages that use ``{name.rsplit('.', 1)[-1]}``",
            "   :heading-level: ^",
            "",
        ]


def offline_reference(app, env, node, contnode):  # noqa: ARG001  (Sphinx's signature)
    """missing-reference hook: other projects' names as unlinked code when offline."""
    if app.config.effpt_api_links or node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    root = target.split(".", 1)[0].lstrip("~")
    if root in EXTERNAL_ROOTS or target in BUILTIN_NAMES:
        return contnode if isinstance(contnode, nodes.Node) else None
    return None


def setup(app) -> None:
    app.add_config_value("effpt_api_links", True, "env")
    app.connect("autodoc-process-docstring", add_minigallery)
    app.connect("missing-reference", offline_reference)
