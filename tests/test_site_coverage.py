"""How much of each page the Chinese edition translated (docs/_ext/effpt_site/coverage.py):
counted per page, printed and held to the threshold at the end of the build, and said
under the title of a page that still shows English."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document
from sphinx.errors import ExtensionError

from effpt_site import coverage
from effpt_site.catalogues import Coverage
from effpt_site.i18n import catalogue_coverage, translate


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


def _app(language="zh_CN", builder="html", threshold="0.95", per_doc=None):
    env = SimpleNamespace(docname="auto/fam/plot_a")
    if per_doc is not None:
        env.effpt_coverage = per_doc
    config = SimpleNamespace(language=language, effpt_translation_threshold=threshold)
    return SimpleNamespace(config=config, builder=SimpleNamespace(name=builder), env=env)


def test_only_a_translated_html_build_counts_its_pages():
    document = new_document("page.rst", get_default_settings(Parser))
    for app in (_app(language="en"), _app(builder="gettext")):
        coverage._count_page(app, document)
        assert not hasattr(app.env, "effpt_coverage")
    app = _app()
    coverage._count_page(app, document)
    assert app.env.effpt_coverage == {"auto/fam/plot_a": Coverage(0, 0, 0)}


def test_a_translation_below_the_threshold_fails_the_build_naming_share_and_setting():
    # 10,000 untranslated messages outweigh the extension's own strings (all translated).
    app = _app(per_doc={"auto/fam/plot_a": Coverage(0, 0, 10_000)})
    with pytest.raises(
        ExtensionError,
        match=r"the zh_CN translation covers \d\.\d+% of its messages, below "
        r"effpt_translation_threshold = 95%; run `nox -s translations`",
    ):
        coverage._report_coverage(app, None)
    coverage._report_coverage(_app(language="en", per_doc=app.env.effpt_coverage), None)
    coverage._report_coverage(app, RuntimeError("the build failed already"))  # not again


def test_the_share_counts_the_pages_and_the_extensions_strings_and_names_stale_pages(caplog):
    own = catalogue_coverage("zh_CN")
    per_doc = {"index": Coverage(4, 0, 4), "auto/fam/plot_a": Coverage(3, 0, 6)}
    with caplog.at_level("INFO"):
        coverage._report_coverage(_app(threshold="0", per_doc=per_doc), None)
    share = 100 * (7 + own.translated) / (10 + own.total)
    assert (
        f"effpt: zh_CN translation: {share:.1f} % of {10 + own.total} messages translated "
        f"and not fuzzy; 1 of 2 pages show some English (auto/fam/plot_a); "
        f"{own.translated} of the extension's {own.total} strings translated (effpt_site.po)"
    ) in caplog.text


def _titled_page():
    section = nodes.section()
    section += nodes.title(text="Fit a line")
    section += nodes.paragraph(text="Prose.")
    document = new_document("page.rst", get_default_settings(Parser))
    document += section
    return document, section


def test_a_page_that_still_shows_english_says_so_under_its_title_and_links_the_english():
    document, section = _titled_page()
    app = _app(per_doc={"auto/fam/plot_a": Coverage(3, 0, 5)})
    coverage._note_stale(app, document, "auto/fam/plot_a")
    note = section[1]
    assert isinstance(section[0], nodes.title)
    assert note["classes"] == ["effpt-stale"]
    expected = translate(
        "zh_CN",
        "This translation is older than the English page: {count} of its {total} "
        "passages are shown in English until they are translated.",
        count=2,
        total=5,
    )
    assert note.astext().startswith(expected)
    (link,) = note.findall(nodes.reference)
    assert link["refuri"] == "../../../auto/fam/plot_a.html"  # up out of zh_CN/ too
    assert link.astext() == translate("zh_CN", "Read the English page")


@pytest.mark.parametrize(
    ("language", "counted"),
    [("zh_CN", Coverage(5, 0, 5)), ("zh_CN", None), ("en", Coverage(3, 0, 5))],
    ids=["all-translated", "not-counted", "english"],
)
def test_no_note_where_nothing_is_english_or_the_page_is_english(language, counted):
    document, section = _titled_page()
    per_doc = {} if counted is None else {"auto/fam/plot_a": counted}
    coverage._note_stale(_app(language=language, per_doc=per_doc), document, "auto/fam/plot_a")
    assert [type(child) for child in section] == [nodes.title, nodes.paragraph]


def test_the_extensions_catalogue_is_counted_from_the_passed_check_when_unchanged(
    tmp_path, monkeypatch
):
    """The catalogue check at the start of the build recorded its counts: not parsed again."""
    import shutil

    from effpt_site import catalogues
    from effpt_site.i18n import catalogue_of

    po = tmp_path / "effpt_site.po"
    shutil.copy(catalogue_of("zh_CN"), po)
    monkeypatch.setattr(coverage, "catalogue_of", lambda _language: po)
    app = _app(threshold="0", per_doc={"index": Coverage(4, 0, 4)})
    app.srcdir = str(tmp_path)
    app.config.effpt_catalogue_record_dir = "records"
    record = catalogues.record_file(app, "zh_CN")
    passed = catalogues.CheckedCatalogues(record)
    expected, _ = passed.check(po, "rst")  # what builder-inited's check did
    passed.save()
    checks = []
    check = catalogues.check_catalogue
    monkeypatch.setattr(catalogues, "check_catalogue", lambda *a: checks.append(1) or check(*a))
    assert coverage.own_coverage(app, "zh_CN") == expected
    assert checks == []
    # A catalogue changed since it was recorded is counted (and checked) anew.
    po.write_text(po.read_text(encoding="utf-8") + '\nmsgid "New"\nmsgstr ""\n', "utf-8")
    counted = coverage.own_coverage(app, "zh_CN")
    assert checks == [1]
    assert counted.total == expected.total + 1


def test_pages_counted_by_a_parallel_reader_reach_the_main_build():
    """With ``-j 2`` Sphinx reads pages in other processes and merges their environments:
    a page counted there must be in the main build's count, or the threshold would be
    held to the pages the main process happened to read."""
    main = SimpleNamespace(effpt_coverage={"a": Coverage(1, 0, 2)})
    other = SimpleNamespace(effpt_coverage={"b": Coverage(3, 0, 4), "c": Coverage(0, 0, 1)})
    coverage._merge_pages(None, main, {"b"}, other)
    assert main.effpt_coverage == {"a": Coverage(1, 0, 2), "b": Coverage(3, 0, 4)}
    fresh = SimpleNamespace()  # the main process read no translated page itself
    coverage._merge_pages(None, fresh, {"b", "c"}, other)
    assert fresh.effpt_coverage == {"b": Coverage(3, 0, 4), "c": Coverage(0, 0, 1)}
