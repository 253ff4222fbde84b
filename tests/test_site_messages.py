"""The extension's translatable strings (docs/_ext/effpt_site/messages.py): every string it
shows is extracted into the template the translators work from.
"""

from __future__ import annotations

from types import SimpleNamespace

from test_site_across_machines import _expectation, record, write

from effpt import claims
from effpt.expect import VERDICTS
from effpt_site import (
    across_machines,
    expectations,
    i18n,
    measurements,
    messages,
)


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


def test_the_catalogue_template_holds_the_records_statements(tmp_path):
    write(tmp_path, "a", record(expectations=[_expectation("x beats y", 2.0)]))
    write(
        tmp_path, "b", record(expectations=[_expectation("x beats y", 0.5), _expectation("q", 2.0)])
    )
    assert messages.recorded_statements(tmp_path) == ["x beats y", "q"]
