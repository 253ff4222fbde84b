"""The Chinese edition's checks (docs/_ext/effpt_site/i18n.py) name the file and line."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document
from sphinx.errors import ExtensionError
from sphinx.search import _MINIFIED_JS_PATH

from effpt_site import catalogues, coverage, i18n

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


def test_the_extension_strings_fall_back_to_english():
    assert i18n.translate("zh_CN", "Read the English page") == "阅读英文页面"
    assert i18n.translate("de", "Read the English page") == "Read the English page"
    assert i18n.translate("zh_CN", "No such string {x}", x=1) == "No such string 1"


def _strings_passed_to_translate():
    """Every constant string the extension passes to translate() or its local t()."""
    import ast
    from pathlib import Path

    package = Path(i18n.__file__).parent
    found = {}
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            args = node.args
            if node.func.id == "translate" and len(args) >= 2:
                text = args[1]
            elif node.func.id == "t" and args:
                text = args[0]
            else:
                continue
            if isinstance(text, ast.Constant) and isinstance(text.value, str):
                found[text.value] = f"{path.name}:{node.lineno}"
    return found


def test_every_string_the_extension_writes_has_a_chinese_version():
    strings = _strings_passed_to_translate()
    assert len(strings) > 20
    missing = {s: where for s, where in strings.items() if s not in i18n.MESSAGES["zh_CN"]}
    assert not missing, f"add these to effpt_site.i18n.MESSAGES['zh_CN']: {missing}"


def test_every_claim_and_verdict_has_a_chinese_version():
    from effpt_site import measurements

    words = {"yes", "nearly", "no", "inconclusive", "faster", "slower"}
    for claim in measurements.CLAIMS:
        words |= {claim.text, claim.source}
    missing = sorted(w for w in words if w not in i18n.MESSAGES["zh_CN"])
    assert not missing, f"add these to effpt_site.i18n.MESSAGES['zh_CN']: {missing}"


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
        pagename="auto_examples/amp/plot_a",
        pathto=lambda name, *_: "../../" + name,  # pathto(name, 1): a resource
    )
    assert f'href="{target}"' in html, html
    assert html.endswith(f">{text}</a>"), html


def test_the_chinese_search_names_a_stemmer_its_javascript_defines():
    language = i18n.chinese_search_language()
    code = (_MINIFIED_JS_PATH / language.js_stemmer_rawcode).read_text(encoding="utf-8")
    # language_data.js ends with `window.Stemmer = <language_name>Stemmer;`
    assert f"{language.language_name}Stemmer=" in code.replace(" ", "")
