"""The verdict box (docs/_ext/effpt_site/verdict_box.py): after each output that prints
expectations, each one's bound, this build's value and verdict, and how it fared elsewhere.

The one-page site in tests/test_site_across_machines.py checks the box end to end in both
languages; these tests check which output gets a box and what the box holds.
"""

from __future__ import annotations

from docutils import nodes

from effpt.expect import expect
from effpt.machine import Machine
from effpt_site import across_machines as across
from effpt_site import verdict_box

CPU = Machine("cpu", "x86_64 CPU (Fixture)", 2, None, "2.13.0")


def _e(statement, value, *, above=1.0):
    return expect(
        statement, (value, value * 0.95, value * 1.05), above=above, device=CPU, show=False
    )


def _columns(*others):
    here = across.PageRun(True, True, None, (_e("x beats y", 2.0), _e("z beats w", 0.5)))
    cols = [across.Column("this-build", CPU, None, "", "", None, {"plot_a": here})]
    for i, expectations in enumerate(others):
        run = across.PageRun(True, True, None, tuple(expectations))
        path = f"/records/box-{i}.json"
        other = Machine("cpu", f"x86_64 CPU (Other {i})", 8, None, "2.13.0")
        cols.append(
            across.Column(f"box-{i}", other, None, "AVX2", f"Other {i}", path, {"plot_a": run})
        )
    return cols


def _rows(shown):
    return [across.Row("expect", "fam", "plot_a", "auto/fam/plot_a", e.statement) for e in shown]


def test_only_the_lines_the_run_recorded_are_matched_in_printed_order():
    x, z = _e("x beats y", 2.0), _e("z beats w", 0.5)
    text = f"timings ...\n{z}\nsomething\n{x}\nExpectation: a line no run recorded.\n"
    assert [e.statement for e in verdict_box.shown_in(text, [x, z])] == ["z beats w", "x beats y"]
    # a line that merely mentions a statement is not its printed verdict
    assert verdict_box.shown_in("x beats y: holds here", [x, z]) == []


def test_the_box_holds_each_bound_value_verdict_and_elsewhere_in_english():
    x, z = _e("x beats y", 2.0), _e("z beats w", 0.5)
    cols = _columns([_e("x beats y", 3.0), _e("z beats w", 3.0)], [_e("x beats y", 0.5)])
    made = verdict_box.box([x, z], _rows([x, z]), cols, "../../measurements.html", "en")
    assert "effpt-verdict-box" in made["classes"]
    assert made.children[0].astext() == "What this run found"
    items = list(made.findall(nodes.list_item))
    assert len(items) == 2
    first, second = (item.astext().split("\n\n") for item in items)
    assert first == [
        "x beats y",
        f"Expected above 1×. This build: 2.0× (1.9–2.1) on {CPU}: holds here",
        "Elsewhere: holds on 1 of 2 machines recorded; does not hold on Other 1 (AVX2).",
    ]
    assert (
        second[1]
        == f"Expected above 1×. This build: 0.50× (0.47–0.53) on {CPU}: does not hold here"
    )
    assert second[2] == "Elsewhere: holds on 1 of 1 machines recorded."
    # the verdict word carries its class, the item too (the style draws a mark by it)
    words = list(made.findall(nodes.strong))
    assert [w["classes"] for w in words] == [
        ["effpt-verdict-word", "effpt-holds"],
        ["effpt-verdict-word", "effpt-fails"],
    ]
    assert items[1]["classes"] == ["effpt-fails"]
    # the statement leads to its row on the measurements page
    (link, _) = made.findall(nodes.reference)
    assert link["refuri"] == f"../../measurements.html#{_rows([x])[0].anchor}"


def test_the_box_speaks_chinese_with_its_verdict_words_translated():
    x = _e("x beats y", 0.5, above=2.0)
    made = verdict_box.box([x], _rows([x]), _columns(), "m.html", "zh_CN")
    text = made.astext()
    assert made.children[0].astext() == "本次运行的结果"
    assert "预期高于 2×。本次构建在" in text
    assert "上测得 0.50× (0.47–0.53)：在此不成立" in text  # no space after a full-width colon
    assert "does not hold" not in text
    assert "尚无其他机器用本页的这一版本留下记录。" in text


def test_chinese_sentences_part_without_a_space():
    x = _e("x beats y", 2.0)
    older = across.PageRun(False, True, None, (_e("x beats y", 3.0),))
    cols = _columns()
    other = Machine("cpu", "x86_64 CPU (Old)", 8, None, "2.13.0")
    cols.append(across.Column("old", other, None, "", "Old", "/r/old.json", {"plot_a": older}))
    text = verdict_box.box([x], _rows([x]), cols, "m.html", "zh_CN").astext()
    assert "留下记录。另有 1 台机器的记录来自本页的旧版本。" in text
