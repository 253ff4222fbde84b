"""No page copies its sources: a run of 12 words (or 20 Chinese characters) they share fails.

The house rule is that every sentence and line of the site is its own; the sources give
facts. ``tests/seed_fingerprints.bin`` holds hashes of every 12-word run of the four
sources and every 20-character run of the Chinese one (``docs/_tools/seed_overlap.py``
says how they are made), so the check runs without the sources' text in the repository.
Prose and code count alike: a long copied code block must be rewritten too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import seed_overlap as so

ROOT = Path(__file__).resolve().parent.parent
PRINTS_FILE = ROOT / "tests" / "seed_fingerprints.bin"


@pytest.fixture(scope="module")
def prints() -> set[bytes]:
    return so.read_fingerprints(PRINTS_FILE)


def test_no_page_shares_a_run_with_the_sources(prints: set[bytes]) -> None:
    found = so.scan(ROOT, prints)
    report = "\n".join(f"{name}: {run!r}" for name, runs in found.items() for run in runs)
    assert not found, f"text shared with the sources (rewrite it in your own words):\n{report}"


def test_the_scan_reads_every_kind_of_page() -> None:
    english, chinese = so.site_files(ROOT)
    names = {p.relative_to(ROOT).as_posix() for p in english + chinese}
    assert "examples/basics/plot_modules.py" in names
    assert "docs/index.md" in names
    assert "docs/locale/zh_CN/LC_MESSAGES/index.po" in names
    assert not any("auto_examples" in n and n.endswith(".py") for n in names)


def test_a_copied_run_is_found_and_a_shorter_one_is_not() -> None:
    source = "A module owns its parameters, and calling parameters() walks every submodule too, depth first."
    prints = so.fingerprints([source])
    page = "As the guide puts it: a module owns its parameters, and calling parameters() walks"
    assert so.shared_english(page, prints) == []  # nine words in common
    copied = "Note: A MODULE owns its parameters -- and calling `parameters()` walks every submodule too!"
    assert so.shared_english(copied, prints) == [
        "a module owns its parameters and calling parameters walks every submodule too"
    ]
    eleven = "a module owns its parameters and calling parameters walks every submodule"
    assert so.shared_english(eleven, prints) == []


def test_chinese_runs_count_only_with_chinese_in_them() -> None:
    source = "广播允许我们进行隐式平铺，这使得代码更短，更节省内存。torch.utils.data.DataLoader"
    prints = so.fingerprints([source])
    po = 'msgid "x"\nmsgstr ""\n"广播允许我们进行隐式平铺，"\n"这使得代码更短。"\n\nmsgid "y"\nmsgstr "torch.utils.data.DataLoader"\n'
    text = "\n".join(so.msgstrs(po))
    assert so.shared_chinese(text, prints) == ["广播允许我们进行隐式平铺，这使得代码更短"]


def test_a_damaged_fingerprint_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "prints.bin"
    bad.write_bytes(b"\x00" * (so.DIGEST + 1))
    with pytest.raises(ValueError, match=r"prints\.bin: 7 bytes"):
        so.read_fingerprints(bad)
