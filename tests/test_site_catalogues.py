"""docs/_ext/effpt_site/catalogues.py: a catalogue is checked again only when it changed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from sphinx.errors import ExtensionError

from effpt_site import catalogues

HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
GOOD = 'msgid "Use :func:`torch.sum`."\nmsgstr "用 :func:`torch.sum`。"\n'
BROKEN = 'msgid "Read ``x.grad`` (the sum)."\nmsgstr "读取 ``x.grad``（总和）。"\n'


def write_po(tmp_path, name: str, body: str):
    folder = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES" / "auto_examples"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(HEADER + body, encoding="utf-8")
    return path


@pytest.fixture
def counted(monkeypatch):
    """The catalogues check_catalogue really checked, in order."""
    seen = []
    real = catalogues.check_catalogue

    def counting(path, syntax="rst"):
        seen.append(path.name)
        return real(path, syntax)

    monkeypatch.setattr(catalogues, "check_catalogue", counting)
    return seen


def test_an_unchanged_catalogue_is_not_checked_again(tmp_path, counted):
    write_po(tmp_path, "plot_a.po", GOOD)
    b = write_po(tmp_path, "plot_b.po", GOOD)
    record = tmp_path / "doctrees" / "effpt-catalogues-zh_CN.json"
    first = catalogues.check_catalogues(tmp_path, "zh_CN", record)
    assert counted == ["plot_a.po", "plot_b.po"]
    assert record.is_file()
    again = catalogues.check_catalogues(tmp_path, "zh_CN", record)
    assert counted == ["plot_a.po", "plot_b.po"]  # nothing checked the second time
    assert again == first == catalogues.Coverage(2, 0, 2)
    b.write_text(HEADER + GOOD + '\nmsgid "New"\nmsgstr ""\n', encoding="utf-8")
    assert catalogues.check_catalogues(tmp_path, "zh_CN", record) == catalogues.Coverage(2, 0, 3)
    assert counted == ["plot_a.po", "plot_b.po", "plot_b.po"]  # only the changed one


def test_a_catalogue_that_failed_fails_again(tmp_path, counted):
    write_po(tmp_path, "plot_a.po", GOOD)
    bad = write_po(tmp_path, "plot_b.po", BROKEN)
    record = tmp_path / "effpt-catalogues-zh_CN.json"
    for _ in range(2):
        with pytest.raises(ExtensionError, match=rf"{bad}:5: the translation is not valid reST"):
            catalogues.check_catalogues(tmp_path, "zh_CN", record)
    assert counted == ["plot_a.po", "plot_b.po"] * 2
    assert not record.exists()  # nothing is recorded from a run that failed


def test_a_record_of_other_code_or_a_damaged_one_is_not_trusted(tmp_path, counted):
    path = write_po(tmp_path, "plot_a.po", GOOD)
    record = tmp_path / "effpt-catalogues-zh_CN.json"
    catalogues.check_catalogues(tmp_path, "zh_CN", record)
    data = json.loads(record.read_text(encoding="utf-8"))
    assert data["catalogues"][str(path)]["counts"] == [1, 0, 1]
    record.write_text(json.dumps({**data, "version": "older code"}), encoding="utf-8")
    catalogues.check_catalogues(tmp_path, "zh_CN", record)
    record.write_text("{not json", encoding="utf-8")
    catalogues.check_catalogues(tmp_path, "zh_CN", record)
    assert counted == ["plot_a.po"] * 3
    assert json.loads(record.read_text(encoding="utf-8"))["version"] == data["version"]


def test_a_catalogue_read_as_another_syntax_is_checked_again(tmp_path):
    path = write_po(tmp_path, "plot_a.po", GOOD)
    checked = catalogues.CheckedCatalogues(tmp_path / "record.json")
    assert checked.check(path, "rst")[1] is True
    assert checked.check(path, "rst")[1] is False
    assert checked.check(path, "md")[1] is True


# -- the page catalogues' checks (moved from the i18n tests) ----------------------------


def test_a_good_catalogue_is_counted(tmp_path):
    write_po(
        tmp_path,
        "plot_a.po",
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
    path = write_po(tmp_path, "plot_a.po", body)
    with pytest.raises(ExtensionError, match=rf"{path}:{line}: this translation catalogue"):
        catalogues.check_catalogues(tmp_path, "zh_CN")


def test_markup_that_no_longer_matches_names_the_file_and_line(tmp_path):
    body = (
        'msgid "First."\nmsgstr "第一。"\n\n'
        'msgid "Call :func:`torch.compile` once."\nmsgstr "调用一次 :func:`torch.jit.script`。"\n'
    )
    path = write_po(tmp_path, "plot_a.po", body)
    with pytest.raises(ExtensionError, match=rf"{path}:8: the translation's reST markup"):
        catalogues.check_catalogues(tmp_path, "zh_CN")


def test_a_translated_link_text_is_fine_but_its_target_must_stay(tmp_path):
    body = 'msgid "See :doc:`the timing page </explanations/timing>`."\nmsgstr "见 :doc:`计时一页 </explanations/timing>`。"\n'
    write_po(tmp_path, "plot_a.po", body)
    assert catalogues.check_catalogues(tmp_path, "zh_CN").translated == 1


def test_markup_that_docutils_cannot_parse_names_the_file_and_line(tmp_path):
    body = 'msgid "Read ``x.grad`` (the sum)."\nmsgstr "读取 ``x.grad``（总和）。"\n'
    path = write_po(tmp_path, "plot_a.po", body)
    with pytest.raises(ExtensionError, match=rf"{path}:5: the translation is not valid reST"):
        catalogues.check_catalogues(tmp_path, "zh_CN")
    path.write_text(HEADER + body.replace("``（", "``\\\\ （"), encoding="utf-8")
    assert catalogues.check_catalogues(tmp_path, "zh_CN").translated == 1


def test_a_translated_build_made_from_nothing_finds_the_record_of_an_earlier_one(tmp_path, counted):
    """The record outlives the language's output and doctrees (a cold Chinese pass)."""
    write_po(tmp_path, "plot_a.po", GOOD)

    def app(doctrees):
        config = SimpleNamespace(language="zh_CN", effpt_catalogue_record_dir="_build")
        return SimpleNamespace(
            srcdir=str(tmp_path),
            doctreedir=str(tmp_path / doctrees),
            outdir=str(tmp_path / "_build" / "html" / "zh_CN"),
            config=config,
            builder=SimpleNamespace(name="html"),
        )

    catalogues._check_catalogues(app("_build/html/zh_CN/.doctrees"))
    assert counted == ["plot_a.po"]
    # the output and its doctrees removed: the record is found, nothing is checked again
    catalogues._check_catalogues(app("fresh/.doctrees"))
    assert counted == ["plot_a.po"]
    assert catalogues.record_file(app("x"), "zh_CN").parent == tmp_path / "_build"
    # ... and a changed catalogue is still checked
    write_po(tmp_path, "plot_a.po", GOOD + "\n")
    catalogues._check_catalogues(app("fresh/.doctrees"))
    assert counted == ["plot_a.po", "plot_a.po"]


def test_the_english_is_parsed_only_when_its_translation_reports_a_problem(tmp_path, monkeypatch):
    # A translation docutils parses cleanly adds no problem whatever its English reports,
    # so the English is parsed only to tell a new problem from one it already had.
    parsed = []
    real = catalogues.rst_problems

    def counting(text):
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(catalogues, "rst_problems", counting)
    catalogues.check_catalogue(write_po(tmp_path, "good.po", GOOD))
    assert parsed == ["用 :func:`torch.sum`。"]
    # The same problem in the English and the translation passes; a new one still fails.
    same = 'msgid "Read ``x`` *here."\nmsgstr "读取 ``x`` *这里。"\n'
    catalogues.check_catalogue(write_po(tmp_path, "same.po", same))
    assert parsed[-2:] == ["读取 ``x`` *这里。", "Read ``x`` *here."]
    with pytest.raises(ExtensionError, match="not valid reST"):
        catalogues.check_catalogue(write_po(tmp_path, "broken.po", BROKEN))
