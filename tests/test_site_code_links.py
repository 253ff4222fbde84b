"""sphinx-gallery's linked code cells, kept for both editions (docs/_ext/effpt_site/code_links.py):
a kept cell is used only while everything it was made from is unchanged."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest
from docutils import nodes
from sphinx_gallery import _doctree_links

from effpt_site import code_links

CODE_OBJ = {
    "torch.zeros": [
        {"name": "zeros", "module": "torch", "module_short": "torch", "is_class": False}
    ]
}


class Resolver(_doctree_links._Resolver):
    """sphinx-gallery's resolver over a py domain of our own (no Sphinx build)."""

    def __init__(self, documented: dict[str, str], docname: str = "auto/fam/plot_a") -> None:
        domain = SimpleNamespace(
            objects={
                name: SimpleNamespace(docname=doc, node_id=name, objtype="function", aliased=False)
                for name, doc in documented.items()
            }
        )
        self.env = SimpleNamespace(domains={"py": domain})
        self.builder = SimpleNamespace(
            name="html",
            link_suffix=".html",
            get_relative_uri=lambda _here, there: f"../{there}.html",
        )
        self.docname = docname
        self.prefer_full = []
        self.inventory = {}
        self._cache = {}


def _counting(tmp_path):
    made = []
    real = _doctree_links._tokenize_and_link

    def tokenize(*args):
        made.append(args[0])
        return real(*args)

    return made, code_links.cached(tokenize, tmp_path / "cells")


def _html(children) -> list[str]:
    return [node.pformat() for node in children]


def test_a_kept_cell_gives_the_nodes_sphinx_gallery_makes(tmp_path):
    made, tokenize = _counting(tmp_path)
    code = "x = torch.zeros(3)\n"
    expected = list(
        _doctree_links._tokenize_and_link(
            code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"})
        )
    )
    first = tokenize(code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"}))
    again = tokenize(code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"}))
    assert made == [code]  # made once, then read
    assert _html(first) == _html(again) == _html(expected)
    assert any(isinstance(node, nodes.reference) for node in again)
    assert all(node.parent is None for node in again)  # fresh nodes, ready to insert


@pytest.mark.parametrize(
    "change",
    ["code", "lexer", "page", "link target", "not documented", "code objects", "version"],
)
def test_a_cell_is_made_again_when_what_it_is_made_from_changed(monkeypatch, tmp_path, change):
    made, tokenize = _counting(tmp_path)
    code, lexer, code_obj = "x = torch.zeros(3)\n", "python", CODE_OBJ
    documented, docname = {"torch.zeros": "api"}, "auto/fam/plot_a"
    tokenize(code, lexer, code_obj, Resolver(documented, docname))
    if change == "code":
        code = "y = torch.zeros(3)\n"
    elif change == "lexer":
        lexer = "pycon"
    elif change == "page":
        docname = "auto/other/plot_b"
    elif change == "link target":
        documented = {"torch.zeros": "api/other"}
    elif change == "not documented":
        documented = {}
    elif change == "code objects":
        code_obj = {**CODE_OBJ, "x": CODE_OBJ["torch.zeros"]}
    else:
        monkeypatch.setattr(code_links, "FORMAT", "effpt-code-links 2")
    again = tokenize(code, lexer, code_obj, Resolver(documented, docname))
    assert len(made) == 2
    fresh = _doctree_links._tokenize_and_link(code, lexer, code_obj, Resolver(documented, docname))
    assert _html(again) == _html(list(fresh))


def test_an_unreadable_kept_cell_is_made_again(tmp_path):
    made, tokenize = _counting(tmp_path)
    code = "x = torch.zeros(3)\n"
    tokenize(code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"}))
    (kept,) = (tmp_path / "cells").glob("*.pickle")
    kept.write_bytes(b"not a pickle")
    again = tokenize(code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"}))
    assert len(made) == 2
    assert any(isinstance(node, nodes.reference) for node in again)


def test_the_build_wraps_sphinx_gallerys_tokenizer_once(monkeypatch, tmp_path):
    original = _doctree_links._tokenize_and_link
    monkeypatch.setattr(_doctree_links, "_tokenize_and_link", original)
    app = SimpleNamespace(srcdir=str(tmp_path))
    config = SimpleNamespace(effpt_code_links_dir="_build/cells")
    code_links._install(app, config)
    code_links._install(app, config)  # a second build in the same process
    assert _doctree_links._tokenize_and_link.effpt_wraps is original


def test_kept_cells_no_build_used_for_a_month_are_removed(tmp_path):
    made, tokenize = _counting(tmp_path)
    code = "x = torch.zeros(3)\n"
    tokenize(code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"}))
    (used,) = (tmp_path / "cells").glob("*.pickle")
    stale = tmp_path / "cells" / "0123.pickle"  # a cell since edited
    stale.write_bytes(b"")
    month_ago = time.time() - 31 * 24 * 3600
    for path in (used, stale):
        os.utime(path, (month_ago, month_ago))
    tokenize(code, "python", CODE_OBJ, Resolver({"torch.zeros": "api"}))  # read: used now
    app = SimpleNamespace(
        srcdir=str(tmp_path), config=SimpleNamespace(effpt_code_links_dir="cells")
    )
    code_links._prune(app, None)
    assert list((tmp_path / "cells").glob("*.pickle")) == [used]
    assert made == [code]
