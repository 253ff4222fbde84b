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
