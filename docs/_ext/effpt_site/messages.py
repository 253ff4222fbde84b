"""The extension's own strings: found in its code, written out as a gettext template.

Every string this extension shows a reader passes through :func:`effpt_site.i18n.translate`
(or a module's local ``t()`` that calls it), or is marked with :func:`effpt_site.i18n.N_`
where it is defined away from that call (the verdict words, the theme's texts).
:func:`extract` finds them in the package's source; the sources' claims, which the
measurements page shows, are data in :mod:`effpt.claims` and are added from there, and
the expectation statements the evidence records in docs/evidence hold are added from
those (:func:`recorded_statements`).
When Sphinx's gettext builder runs (``nox -s translations``) :func:`write_template`
writes them to ``effpt_site.pot`` beside the pages' templates, and ``sphinx-intl
update`` carries them
into docs/locale/<language>/LC_MESSAGES/effpt_site.po, where translators edit them like
any page's messages. :func:`effpt_site.i18n.translate` reads that catalogue.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The catalogue's name: effpt_site.pot, and effpt_site.po per language.
DOMAIN = "effpt_site"
PACKAGE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Found:
    """A string the code passes to translate(), t() or N_(), and where."""

    text: str
    where: str


@dataclass(frozen=True)
class Unresolved:
    """A call whose text is not a constant the source names (e.g. ``claim.text``)."""

    expression: str
    where: str


def _text_argument(call: ast.Call) -> ast.expr | None:
    if not isinstance(call.func, ast.Name):
        return None
    name, args = call.func.id, call.args
    if name == "translate" and len(args) >= 2:
        return args[1]
    if name in {"t", "N_"} and args:
        return args[0]
    return None


def _assigned(scope: ast.AST, name: str) -> list[ast.expr]:
    """What ``name`` is given in ``scope``: assignments, and dict values it loops over."""
    values: list[ast.expr] = []
    nodes = ast.walk(scope) if not isinstance(scope, ast.Module) else iter(scope.body)
    for node in nodes:
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name) and node.target.id == name:
                values.append(node.value)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call):
            # for key, label in PARTS.items(): label is one of PARTS's values
            method = node.iter.func
            if not (isinstance(method, ast.Attribute) and isinstance(method.value, ast.Name)):
                continue
            target = node.target
            last = target.elts[-1] if isinstance(target, ast.Tuple) else target
            if (
                isinstance(last, ast.Name)
                and last.id == name
                and method.attr in {"items", "values"}
            ):
                for table in _assigned(_module(scope), method.value.id):
                    if isinstance(table, ast.Dict):
                        values += table.values
    return values


def _module(scope: ast.AST) -> ast.Module:
    while not isinstance(scope, ast.Module):
        scope = scope.parent  # type: ignore[attr-defined]  (set by extract)
    return scope


def _constants(scope: ast.AST, expr: ast.expr, seen: frozenset[str] = frozenset()) -> list[str]:
    """The string constants ``expr`` can be, or [] when the source does not say.

    A name is looked up in the function that uses it, then in the module.
    """
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.IfExp):
        body, orelse = _constants(scope, expr.body, seen), _constants(scope, expr.orelse, seen)
        return body + orelse if body and orelse else []
    if isinstance(expr, ast.Name) and expr.id not in seen:
        values = _assigned(scope, expr.id) or _assigned(_module(scope), expr.id)
        found = [_constants(scope, value, seen | {expr.id}) for value in values]
        return [text for texts in found for text in texts] if found and all(found) else []
    return []


def _scope(node: ast.AST) -> ast.AST:
    """The function around ``node``, or its module."""
    while not isinstance(node, (ast.FunctionDef, ast.Module)):
        node = node.parent  # type: ignore[attr-defined]
    return node


def extract(package: Path = PACKAGE) -> tuple[list[Found], list[Unresolved]]:
    """Every string the package's modules pass to translate(), t() or N_(), in source order.

    A call whose text the source does not name as a constant (a variable holding one of
    several constants is followed to them) is listed as unresolved: its strings must be
    marked with ``N_`` where they are defined.
    """
    found: dict[str, Found] = {}
    unresolved = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                child.parent = node  # type: ignore[attr-defined]
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _text_argument(n)]
        for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
            where = f"{path.name}:{call.lineno}"
            texts = _constants(_scope(call), _text_argument(call))
            if not texts:
                unresolved.append(Unresolved(ast.unparse(_text_argument(call)), where))
            for text in texts:
                found.setdefault(text, Found(text, where))
    return list(found.values()), unresolved


def template(project: str = "", version: str = ""):
    """The gettext template of the extension's strings, as a babel Catalog."""
    from babel.messages.catalog import Catalog  # noqa: PLC0415  (docs tools only)

    from effpt.claims import CLAIMS  # noqa: PLC0415  (the claims table's text is data)

    catalog = Catalog(project=project, version=version, charset="utf-8")
    for message in extract()[0]:
        catalog.add(message.text)
    for claim in CLAIMS:
        catalog.add(claim.text)
        catalog.add(claim.source)
    for statement in recorded_statements():
        catalog.add(statement)
    return catalog


#: The evidence records' folder (docs/evidence), whose statements the grid shows.
EVIDENCE = PACKAGE.parents[1] / "evidence"


def recorded_statements(folder: Path = EVIDENCE) -> list[str]:
    """Every expectation statement the evidence records hold, once each, in file order.

    The measurements page shows them in the reader's language
    (:func:`effpt_site.i18n.translate_data`); a malformed record fails here as in the build.
    """
    import sys  # noqa: PLC0415

    tools = str(PACKAGE.parents[1] / "_tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import evidence  # noqa: PLC0415  (docs/_tools/evidence.py)

    found: dict[str, None] = {}
    for data in evidence.read_all(folder).values():
        for page in data["pages"].values():
            for item in page["expectations"]:
                if isinstance(item.get("statement"), str):
                    found.setdefault(item["statement"])
    return list(found)


def write_template(app, exception) -> None:
    """build-finished: beside the pages' templates, write the extension's (gettext builder)."""
    if exception is not None or app.builder.name != "gettext":
        return
    from babel.messages.pofile import write_po  # noqa: PLC0415

    path = Path(app.outdir) / f"{DOMAIN}.pot"
    catalog = template(app.config.project, app.config.version)
    with path.open("wb") as f:
        write_po(f, catalog, no_location=True, omit_header=False)
    logger.info("effpt: %d strings of the extension written to %s", len(catalog), path)


def setup(app) -> None:
    app.connect("build-finished", write_template)
