"""The API reference: minigalleries under effpt's objects, and offline API names.

Under every public effpt function and class, a minigallery lists the pages that use
it. When the other projects' inventories cannot be fetched (an offline build), their
names are rendered as plain code instead of failing the nitpicky build.

The highlighted source pages (``sphinx.ext.viewcode``) are written again only when a
module's file is newer than its page; to learn which file that is, viewcode imports the
module, and effpt's modules import torch, a third of a build in which nothing changed.
:func:`module_file` finds an effpt module's file from effpt's folder without importing
it; a page that must be written again is still made by viewcode from the imported module.
"""

from __future__ import annotations

import builtins
import functools
from importlib import util
from pathlib import Path

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


def module_file(modname: str) -> Path | None:
    """The source file of the effpt module ``modname``, found without importing it.

    ``None`` for a module not of effpt or not found (Sphinx then looks as it always does).

    Examples
    --------
    >>> module_file("effpt.device").name, module_file("effpt.data").name
    ('device.py', '__init__.py')
    >>> module_file("json") is None
    True
    """
    parts = modname.split(".")
    spec = util.find_spec("effpt") if parts[0] == "effpt" else None
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent.joinpath(*parts[1:])
    candidates = [folder / "__init__.py", *([folder.with_suffix(".py")] if parts[1:] else [])]
    return next((path.resolve() for path in candidates if path.is_file()), None)


def _find_without_import() -> None:
    """Let viewcode find effpt's module files with :func:`module_file` (others as before)."""
    from sphinx.ext import viewcode  # noqa: PLC0415  (only where the extension is set up)

    sphinx_own = viewcode.get_module_filename
    if getattr(sphinx_own, "effpt_finds_without_import", False):
        return

    @functools.wraps(sphinx_own)
    def get_module_filename(app, modname):
        # A handler of viewcode-find-source answers first, as in Sphinx's own function.
        if app.events.emit_firstresult("viewcode-find-source", modname):
            return None
        found = module_file(modname)
        return found if found is not None else sphinx_own(app, modname)

    get_module_filename.effpt_finds_without_import = True
    viewcode.get_module_filename = get_module_filename


def setup(app) -> None:
    _find_without_import()
    app.add_config_value("effpt_api_links", True, "env")
    app.connect("autodoc-process-docstring", add_minigallery)
    app.connect("missing-reference", offline_reference)
