"""How much of each page the Chinese edition translated (docs/_ext/effpt_site/coverage.py)."""

from __future__ import annotations

from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from effpt_site import (
    coverage,
)


def test_page_coverage_counts_what_sphinx_translated():
    document = new_document("page.rst", get_default_settings(Parser))
    Parser().parse("Title\n=====\n\nFirst paragraph.\n\nSecond paragraph.\n", document)
    for node in document.findall(lambda n: n.tagname == "paragraph"):
        node.source = "page.rst"
    paragraphs = list(document.findall(lambda n: n.tagname == "paragraph"))
    paragraphs[0]["translated"] = True
    counted = coverage.page_coverage(document)
    assert counted.translated == 1
    assert counted.total >= 2
