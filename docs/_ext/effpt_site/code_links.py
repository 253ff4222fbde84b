"""sphinx-gallery's linked code cells, made once for both editions of the site.

sphinx-gallery (0.22) links the names in each code cell to their documentation with a
post-transform that lexes the cell with pygments and makes every token a docutils node
(``sphinx_gallery._doctree_links._tokenize_and_link``): ~140,000 nodes for the site,
a tenth of a cold Chinese build, for code and links that are the same in English and
in Chinese (code is not translated; the links go to the same API pages).

Here that function is wrapped: its nodes for a cell are kept in a file under
``docs/_build/effpt-code-links`` (``effpt_code_links_dir``), named by a hash of
everything they are made from (:func:`cell_key`): the cell's code and lexer, the page
(links are relative to it), the builder, the link each name of the page's code objects
resolves to (the py domain's entries and the intersphinx inventories, through
sphinx-gallery's own resolver), and the versions of sphinx-gallery, Sphinx, docutils,
pygments and Python. The English pass writes them; the Chinese pass, and any later
build, reads them, so an edit to a cell, a page moved, a name documented elsewhere or
an upgrade makes the nodes again. A file that cannot be read is made again; one that
no build read for 30 days is removed.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from pathlib import Path

from sphinx.util import logging

from effpt_site.kept import load, prune_unused, store

logger = logging.getLogger(__name__)

#: What the key's hash starts from; a change to how cells are cached changes it.
FORMAT = "effpt-code-links 1"


def _versions() -> str:
    import docutils  # noqa: PLC0415
    import pygments  # noqa: PLC0415
    import sphinx  # noqa: PLC0415
    import sphinx_gallery  # noqa: PLC0415

    versions = (sphinx_gallery, sphinx, docutils, pygments)
    return " ".join([FORMAT, *(module.__version__ for module in versions), sys.version])


def _links(code_obj: dict, resolver) -> str:
    """Each name of the page's code objects with the link it resolves to, as JSON.

    Computed once per page (sphinx-gallery makes one resolver per page).
    """
    known = getattr(resolver, "_effpt_links", None)
    if known is None:
        links = {}
        for name in sorted(code_obj):
            link = resolver.resolve(code_obj[name])
            links[name] = (
                None if link is None else [list(link["found"]), link["title"], link["classes"]]
            )
        known = resolver._effpt_links = json.dumps(links, sort_keys=True)
    return known


def cell_key(code: str, lexer_name: str, code_obj: dict, resolver) -> str:
    """The hash of everything a cell's linked nodes are made from (see the module's text)."""
    builder = resolver.builder
    parts = [
        _versions(),
        code,
        lexer_name,
        resolver.docname,
        builder.name,
        str(getattr(builder, "link_suffix", "")),
        json.dumps(code_obj, sort_keys=True, default=str),
        _links(code_obj, resolver),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def cached(tokenize, folder: Path):
    """``tokenize`` (sphinx-gallery's ``_tokenize_and_link``), its nodes kept in ``folder``."""

    def tokenize_and_link(code, lexer_name, code_obj, resolver):
        path = folder / f"{cell_key(code, lexer_name, code_obj, resolver)}.pickle"
        try:
            return load(path)
        except Exception:  # noqa: BLE001, S110  (none yet, or unreadable: made again)
            pass
        made = list(tokenize(code, lexer_name, code_obj, resolver))
        store(path, pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL))
        return made

    tokenize_and_link.effpt_wraps = tokenize
    return tokenize_and_link


def _install(app, config) -> None:
    """config-inited: wrap sphinx-gallery's tokenizer, or say why the cells are not kept."""
    try:
        from sphinx_gallery import _doctree_links  # noqa: PLC0415
    except ImportError:
        logger.info("effpt: sphinx-gallery has no _doctree_links: code cells are not kept")
        return
    tokenize = getattr(_doctree_links, "_tokenize_and_link", None)
    if tokenize is None:
        logger.info("effpt: sphinx-gallery has no _tokenize_and_link: code cells are not kept")
        return
    tokenize = getattr(tokenize, "effpt_wraps", tokenize)
    folder = Path(app.srcdir) / config.effpt_code_links_dir
    _doctree_links._tokenize_and_link = cached(tokenize, folder)


def _prune(app, exception) -> None:
    """build-finished: remove the kept cells no build has read for a month."""
    if exception is None:
        prune_unused(Path(app.srcdir) / app.config.effpt_code_links_dir, "*.pickle")


def setup(app) -> None:
    # Relative to the source folder: shared by the English and the Chinese output.
    app.add_config_value("effpt_code_links_dir", "_build/effpt-code-links", "")
    app.connect("config-inited", _install)
    app.connect("build-finished", _prune)
