"""The extension's own strings and the language switch and search of the Chinese edition
(docs/_ext/effpt_site/i18n.py).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
from sphinx.errors import ExtensionError
from sphinx.search import _MINIFIED_JS_PATH

from effpt_site import (
    catalogues,
    i18n,
    messages,
)

HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'


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


def test_the_chinese_catalogue_holds_the_template_all_translated():
    path = i18n.catalogue_of("zh_CN")
    catalogue = {m.id: m for m in catalogues.read_catalogue(path) if m.id}
    ids = _template_ids()
    assert not ids - catalogue.keys(), f"run `nox -s translations`: {ids - catalogue.keys()}"
    assert not catalogue.keys() - ids, f"obsolete in {path}: {catalogue.keys() - ids}"
    untranslated = sorted(k for k, m in catalogue.items() if m.fuzzy or not m.string)
    assert not untranslated, f"translate these in {path}: {untranslated}"
    assert catalogues.check_catalogue(path).translated == len(ids)


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


def _cutting(monkeypatch):
    """jieba's cut, counted: the texts a split had to cut (not taken from a record)."""
    from sphinx.search import zh

    cuts = []
    real_cut = zh.cut_for_search
    monkeypatch.setattr(zh, "cut_for_search", lambda text: cuts.append(text) or real_cut(text))
    return cuts


def test_chinese_search_reuses_the_splits_a_build_with_the_same_dictionary_recorded(
    monkeypatch, tmp_path
):
    """A Chinese build made from nothing (its output and doctrees removed) splits the same
    texts as the last one: it takes their words from the record under docs/_build, and
    never loads jieba's dictionary when every text is there; the words and Latin terms
    are those Sphinx's own split gives."""
    from sphinx.search import zh

    words = tmp_path / "dict.txt"
    words.write_text("批次大小 3 n\n", encoding="utf-8")
    record = tmp_path / "_build" / "effpt-search-splits-zh_CN.json"
    texts = ["批次大小 torch.compile", "x", "性能分析器 step_2"]
    reference = zh.SearchChinese({"dict": str(words)})
    expected = [reference.split(t) for t in texts]

    cuts = _cutting(monkeypatch)
    first = i18n.chinese_search_language(record)({"dict": str(words)})
    assert [first.split(t) for t in texts] == expected
    first.save_splits()
    assert cuts == texts

    cuts.clear()
    loads = []
    monkeypatch.setattr(zh, "jieba_load_userdict", loads.append)
    second = i18n.chinese_search_language(record)({"dict": str(words)})
    assert [second.split(t) for t in texts] == expected
    assert second.latin_terms == reference.latin_terms
    assert (cuts, loads) == ([], [])  # nothing cut, no dictionary loaded
    new_words = reference.split("新的文本")
    cuts.clear()
    assert second.split("新的文本") == new_words  # a new text is cut
    assert cuts == ["新的文本"]


@pytest.mark.parametrize("change", ["dictionary", "jieba", "record"])
def test_chinese_search_splits_again_when_what_split_them_changed(monkeypatch, tmp_path, change):
    """The record holds for the dictionary's bytes, jieba's and Sphinx's versions; a
    record from another dictionary (or version), or one that cannot be read, is
    ignored and rewritten."""
    words = tmp_path / "dict.txt"
    words.write_text("批次大小 3 n\n", encoding="utf-8")
    record = tmp_path / "effpt-search-splits-zh_CN.json"
    first = i18n.chinese_search_language(record)({"dict": str(words)})
    first.split("批次大小")
    first.save_splits()

    if change == "dictionary":
        words.write_text("批次 3 n\n", encoding="utf-8")
    elif change == "jieba":
        monkeypatch.setattr(i18n, "_jieba_version", lambda: "0.0-other")
    else:
        record.write_text("{not json", encoding="utf-8")
    cuts = _cutting(monkeypatch)
    again = i18n.chinese_search_language(record)({"dict": str(words)})
    again.split("批次大小")
    assert cuts == ["批次大小"]
    again.save_splits()
    assert "批次大小" in record.read_text(encoding="utf-8")


def test_chinese_search_records_nothing_without_a_record_file(tmp_path):
    language = i18n.chinese_search_language()({"dict": ""})
    language.split("批次大小")
    language.save_splits()  # no file named: nothing written, nothing fails
    assert list(tmp_path.iterdir()) == []
