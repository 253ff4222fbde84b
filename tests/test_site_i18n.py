"""The Chinese edition's checks (docs/_ext/effpt_site/i18n.py) name the file and line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document
from sphinx.errors import ExtensionError
from sphinx.search import _MINIFIED_JS_PATH

from effpt import claims
from effpt.expect import VERDICTS
from effpt_site import (
    across_machines,
    catalogues,
    coverage,
    expectations,
    i18n,
    measurements,
    messages,
)

HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'


def write_po(tmp_path, body: str):
    folder = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES" / "auto_examples"
    folder.mkdir(parents=True)
    path = folder / "plot_a.po"
    path.write_text(HEADER + body, encoding="utf-8")
    return path


def test_a_good_catalogue_is_counted(tmp_path):
    write_po(
        tmp_path,
        'msgid "Use :func:`torch.sum` on ``x``."\nmsgstr "对 ``x`` 用 :func:`torch.sum`。"\n\n'
        '#, fuzzy\nmsgid "Old text"\nmsgstr "旧文"\n\nmsgid "Not yet"\nmsgstr ""\n',
    )
    counts = catalogues.check_catalogues(tmp_path, "zh_CN")
    assert (counts.translated, counts.fuzzy, counts.total) == (1, 1, 3)


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ('msgid "A"\nmsgstr "甲"\n\nmsgid "B"\nmsgstr "乙\n', 9),  # unclosed string
        ('msgid "A"\nmsgstr "甲"\nnot a keyword\n', 7),
        ('msgid "A"\nmsgid "B"\nmsgstr "乙"\n', 5),  # a msgid without its msgstr
    ],
)
def test_a_syntax_error_names_the_file_and_line(tmp_path, body, line):
    path = write_po(tmp_path, body)
    with pytest.raises(ExtensionError, match=rf"{path}:{line}: this translation catalogue"):
        catalogues.check_catalogues(tmp_path, "zh_CN")


def test_markup_that_no_longer_matches_names_the_file_and_line(tmp_path):
    body = (
        'msgid "First."\nmsgstr "第一。"\n\n'
        'msgid "Call :func:`torch.compile` once."\nmsgstr "调用一次 :func:`torch.jit.script`。"\n'
    )
    path = write_po(tmp_path, body)
    with pytest.raises(ExtensionError, match=rf"{path}:8: the translation's reST markup"):
        catalogues.check_catalogues(tmp_path, "zh_CN")


def test_a_translated_link_text_is_fine_but_its_target_must_stay(tmp_path):
    body = 'msgid "See :doc:`the timing page </explanations/timing>`."\nmsgstr "见 :doc:`计时一页 </explanations/timing>`。"\n'
    write_po(tmp_path, body)
    assert catalogues.check_catalogues(tmp_path, "zh_CN").translated == 1


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


def test_the_extension_strings_come_from_their_catalogue(tmp_path, monkeypatch):
    assert i18n.translate("zh_CN", "Read the English page") == "阅读英文页面"
    assert i18n.translate("de", "Read the English page") == "Read the English page"
    folder = tmp_path / "zh_CN" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "effpt_site.po").write_text(
        HEADER + 'msgid "Done {x}"\nmsgstr "完成 {x}"\n\n#, fuzzy\nmsgid "Old"\nmsgstr "旧"\n\n'
        'msgid "Not yet"\nmsgstr ""\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(i18n, "LOCALE", tmp_path)
    monkeypatch.setattr(i18n, "_TABLES", {})
    assert i18n.translate("zh_CN", "Done {x}", x=1) == "完成 1"
    # fuzzy or untranslated: English until translated (the build's coverage counts them)
    assert i18n.translate("zh_CN", "Old") == "Old"
    assert i18n.translate("zh_CN", "Not yet") == "Not yet"
    assert i18n.catalogue_coverage("zh_CN") == catalogues.Coverage(1, 1, 3)
    with pytest.raises(ExtensionError, match=r"effpt_site\.po lacks the extension's string 'New'"):
        i18n.translate("zh_CN", "New")


def _template_ids() -> set[str]:
    return {message.id for message in messages.template() if message.id}


#: Calls whose text is not a constant the extractor can follow, and why each is covered.
FOLLOWED_ELSEWHERE = {
    "text",  # a module's t(text), which passes its argument on: its callers are extracted
    "message",  # the theme's translator: THEME_MESSAGES, marked with N_
    "SWITCH_TITLES[other]",  # marked with N_
    "c.text",  # effpt.claims's data: messages.template() adds each claim's text and source
    "c.source",
    "outcome.verdict",  # measurements.CLAIM_VERDICTS
    "CELL_VERDICTS[e.verdict]",  # across_machines.CELL_VERDICTS, marked with N_
    "e.verdict",  # expectations._ORDER
}


def test_every_string_the_extension_shows_is_in_the_template():
    found, unresolved = messages.extract()
    assert len(found) > 80
    strange = {u.expression: u.where for u in unresolved if u.expression not in FOLLOWED_ELSEWHERE}
    assert not strange, f"mark these strings with N_ where they are defined: {strange}"
    ids = _template_ids()
    shown = {claim.text for claim in claims.CLAIMS} | {claim.source for claim in claims.CLAIMS}
    shown |= set(i18n.THEME_MESSAGES) | set(i18n.THEME_OPTIONS.values())
    shown |= set(i18n.SWITCH_TITLES.values()) | set(expectations._ORDER)
    shown |= set(across_machines.CELL_VERDICTS.values()) | set(measurements.CLAIM_VERDICTS)
    assert not shown - ids, f"missing from the template: {shown - ids}"
    assert set(expectations._ORDER) == set(VERDICTS)
    assert claims.VERDICTS[:4] == measurements.CLAIM_VERDICTS  # the others show as "—"
    assert set(across_machines.CELL_VERDICTS) == set(VERDICTS)


def test_the_extractor_follows_a_variable_and_names_what_it_cannot(tmp_path):
    (tmp_path / "m.py").write_text(
        "LABEL = 'Label'\n"
        "def f(language, obj, c):\n"
        "    text = 'One' if c else 'Two'\n"
        "    return translate(language, text) + translate(language, LABEL) + t(obj.name)\n",
        encoding="utf-8",
    )
    found, unresolved = messages.extract(tmp_path)
    assert [m.text for m in found] == ["One", "Two", "Label"]
    assert [(u.expression, u.where) for u in unresolved] == [("obj.name", "m.py:4")]


def test_the_gettext_builder_writes_the_template(tmp_path):
    from babel.messages.pofile import read_po

    app = SimpleNamespace(
        builder=SimpleNamespace(name="gettext"),
        outdir=str(tmp_path),
        config=SimpleNamespace(project="Effective PyTorch", version="0.2"),
    )
    messages.write_template(app, None)
    with (tmp_path / "effpt_site.pot").open("rb") as f:
        assert {m.id for m in read_po(f) if m.id} == _template_ids()


def test_the_chinese_catalogue_holds_the_template_all_translated():
    path = i18n.catalogue_of("zh_CN")
    catalogue = {m.id: m for m in catalogues.read_catalogue(path) if m.id}
    ids = _template_ids()
    assert not ids - catalogue.keys(), f"run `nox -s translations`: {ids - catalogue.keys()}"
    assert not catalogue.keys() - ids, f"obsolete in {path}: {catalogue.keys() - ids}"
    untranslated = sorted(k for k, m in catalogue.items() if m.fuzzy or not m.string)
    assert not untranslated, f"translate these in {path}: {untranslated}"
    assert catalogues.check_catalogue(path).translated == len(ids)


def test_markup_that_docutils_cannot_parse_names_the_file_and_line(tmp_path):
    body = 'msgid "Read ``x.grad`` (the sum)."\nmsgstr "读取 ``x.grad``（总和）。"\n'
    path = write_po(tmp_path, body)
    with pytest.raises(ExtensionError, match=rf"{path}:5: the translation is not valid reST"):
        catalogues.check_catalogues(tmp_path, "zh_CN")
    path.write_text(HEADER + body.replace("``（", "``\\\\ （"), encoding="utf-8")
    assert catalogues.check_catalogues(tmp_path, "zh_CN").translated == 1


@pytest.mark.parametrize(
    ("language", "target", "text"),
    [
        ("en", "../../zh_CN/auto_examples/amp/plot_a.html", "中文"),
        # What Sphinx passes for -D language=zh_CN: a BCP 47 tag, not the locale name.
        ("zh-CN", "../../../auto_examples/amp/plot_a.html", "English"),
    ],
)
def test_the_language_switch_leads_to_the_other_language(language, target, text):
    templates = Path(__file__).resolve().parents[1] / "docs" / "_templates"
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(templates)).get_template(
        "language-switch.html"
    )
    html = template.render(
        language=language,
        effpt_switch_name=text,
        effpt_switch_title="the title",
        pagename="auto_examples/amp/plot_a",
        pathto=lambda name, *_: "../../" + name,  # pathto(name, 1): a resource
    )
    assert f'href="{target}"' in html, html
    assert html.endswith(f'title="the title">{text}</a>'), html


@pytest.mark.parametrize(
    ("language", "name", "title"),
    [("en", "中文", "阅读本页的中文版"), ("zh_CN", "English", "Read this page in English")],
)
def test_the_language_switch_is_named_in_the_language_it_leads_to(language, name, title):
    app = SimpleNamespace(config=SimpleNamespace(language=language))
    context = {}
    i18n._language_switch(app, "index", "page.html", context, None)
    assert (context["effpt_switch_name"], context["effpt_switch_title"]) == (name, title)


def test_the_chinese_search_names_a_stemmer_its_javascript_defines():
    language = i18n.chinese_search_language()
    code = (_MINIFIED_JS_PATH / language.js_stemmer_rawcode).read_text(encoding="utf-8")
    # language_data.js ends with `window.Stemmer = <language_name>Stemmer;`
    assert f"{language.language_name}Stemmer=" in code.replace(" ", "")


def test_chinese_search_loads_its_dictionary_at_the_first_split_only(monkeypatch, tmp_path):
    from sphinx.search import zh

    words = tmp_path / "dict.txt"  # the site names none: Sphinx then loads jieba's own
    words.write_text("批次大小 3 n\n", encoding="utf-8")

    events = []
    monkeypatch.setattr(zh, "jieba_load_userdict", lambda path: events.append(("load", path)))
    monkeypatch.setattr(zh, "cut_for_search", lambda text: events.append(("cut", text)) or [text])
    language = i18n.chinese_search_language()({"dict": str(words)})
    assert events == []  # a build that writes no page never loads it
    assert zh.jieba_load_userdict is not events.append  # Sphinx's loader is back in place
    language.split("批次大小")
    language.split("性能分析器")
    assert events == [
        ("load", str(words)),  # the dictionary Sphinx's own class would load
        ("cut", "批次大小"),
        ("cut", "性能分析器"),
    ]
    assert language.language_name == "English"  # the stemmer it ships (sphinx-doc/sphinx#14229)


def test_chinese_search_splits_each_distinct_text_once(monkeypatch):
    """A cold Chinese build splits ~150,000 texts, most of them a code cell's tokens seen
    before; jieba cuts each distinct text once, and the words, and the Latin terms the
    stemmer consults, are the ones Sphinx's own split gives."""
    from sphinx.search import zh

    cuts = []
    real_cut = zh.cut_for_search
    monkeypatch.setattr(zh, "cut_for_search", lambda text: cuts.append(text) or real_cut(text))
    language = i18n.chinese_search_language()({"dict": ""})
    reference = zh.SearchChinese({"dict": ""})
    texts = ["批次大小 torch.compile", "x", "批次大小 torch.compile", "x", "性能分析器 step_2"]
    expected = [reference.split(t) for t in texts]
    cuts.clear()
    assert [language.split(t) for t in texts] == expected
    assert language.latin_terms == reference.latin_terms
    assert cuts == ["批次大小 torch.compile", "x", "性能分析器 step_2"]  # each distinct text once
