"""Find text that the site shares with its sources, without keeping the sources' text.

The site takes facts from four sources (credited on the home page) and writes every
sentence and line itself. This module turns the sources into fingerprints: a short hash
of every run of ``WORDS`` consecutive words (English, case, punctuation and whitespace
ignored) and of every run of ``CHARS`` consecutive characters of the Chinese source
(whitespace ignored) that holds at least ``MIN_CJK`` Chinese characters, so that shared
URLs and API names such as ``torch.utils.data.DataLoader`` do not count. The test
``tests/test_seed_overlap.py`` checks every page against ``tests/seed_fingerprints.bin``.

Make the fingerprints again when the sources change::

    python docs/_tools/seed_overlap.py SEED_FOLDER tests/seed_fingerprints.bin

and list what a checkout shares with them (or with the sources themselves)::

    python docs/_tools/seed_overlap.py --scan [SEED_FOLDER]
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

WORDS = 12
CHARS = 20
MIN_CJK = 5
DIGEST = 6  # bytes: about 1e-10 chance that a window of a page matches by accident

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_SPACE = re.compile(r"\s+")
_MSGSTR = re.compile(r'^msgstr ((?:".*"\n?)+)', re.MULTILINE)
_PO_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def words(text: str) -> list[str]:
    """Lower-case words and numbers, punctuation dropped.

    >>> words("Don't   use `.data`: x.data.add_(1)!")
    ["don't", 'use', 'data', 'x', 'data', 'add', '1']
    """
    return _WORD.findall(text.lower())


def _digest(kind: str, window: str) -> bytes:
    return hashlib.blake2b(f"{kind}:{window}".encode(), digest_size=DIGEST).digest()


def english_windows(text: str) -> Iterator[tuple[int, str]]:
    """Every run of ``WORDS`` words, with the index of its first word."""
    w = words(text)
    for i in range(len(w) - WORDS + 1):
        yield i, " ".join(w[i : i + WORDS])


def chinese_windows(text: str) -> Iterator[tuple[int, str]]:
    """Every run of ``CHARS`` characters (whitespace removed) with ``MIN_CJK`` Chinese ones."""
    s = _SPACE.sub("", text)
    for i in range(len(s) - CHARS + 1):
        window = s[i : i + CHARS]
        if len(_CJK.findall(window)) >= MIN_CJK:
            yield i, window


def fingerprints(seed_texts: list[str]) -> set[bytes]:
    """The hashes of every English and Chinese window of the sources."""
    found: set[bytes] = set()
    for text in seed_texts:
        found.update(_digest("en", w) for _, w in english_windows(text))
        found.update(_digest("zh", w) for _, w in chinese_windows(text))
    return found


def write_fingerprints(prints: set[bytes], path: Path) -> None:
    path.write_bytes(b"".join(sorted(prints)))


def read_fingerprints(path: Path) -> set[bytes]:
    data = path.read_bytes()
    if not data or len(data) % DIGEST:
        msg = f"{path}: {len(data)} bytes is not a whole number of {DIGEST}-byte hashes"
        raise ValueError(msg)
    return {data[i : i + DIGEST] for i in range(0, len(data), DIGEST)}


def _runs(hits: list[int], span: int) -> list[tuple[int, int]]:
    """Merge the starts of matching windows into (first, end) runs."""
    runs: list[tuple[int, int]] = []
    for i in hits:
        if runs and i <= runs[-1][1] - span + 1:
            runs[-1] = (runs[-1][0], i + span)
        else:
            runs.append((i, i + span))
    return runs


def shared_english(text: str, prints: set[bytes]) -> list[str]:
    """The runs of ``WORDS`` or more words of ``text`` that the sources hold."""
    hits = [i for i, w in english_windows(text) if _digest("en", w) in prints]
    w = words(text)
    return [" ".join(w[a:b]) for a, b in _runs(hits, WORDS)]


def shared_chinese(text: str, prints: set[bytes]) -> list[str]:
    """The runs of ``CHARS`` or more characters of ``text`` that the Chinese source holds."""
    hits = [i for i, w in chinese_windows(text) if _digest("zh", w) in prints]
    s = _SPACE.sub("", text)
    return [s[a:b] for a, b in _runs(hits, CHARS)]


def msgstrs(po_text: str) -> list[str]:
    """The translations of a gettext catalogue (msgstr, joined over its lines)."""
    return [
        "".join(_PO_STRING.findall(block)).replace("\\n", "\n").replace('\\"', '"')
        for block in _MSGSTR.findall(po_text)
    ]


def site_files(root: Path) -> tuple[list[Path], list[Path]]:
    """The pages' sources (examples and Markdown) and the Chinese catalogues."""
    skip = ("_build", "auto_examples", "gen_modules", "node_modules")
    english = sorted(
        p
        for pattern in ("examples/**/*.py", "examples/**/*.rst", "docs/**/*.md")
        for p in root.glob(pattern)
        if not any(part in skip for part in p.relative_to(root).parts)
    )
    chinese = sorted((root / "docs" / "locale" / "zh_CN").glob("**/*.po"))
    return english, chinese


def scan(root: Path, prints: set[bytes]) -> dict[str, list[str]]:
    """Every file of the site that shares a run with the sources, and those runs."""
    english, chinese = site_files(root)
    found: dict[str, list[str]] = {}
    for path in english:
        if runs := shared_english(path.read_text(encoding="utf-8"), prints):
            found[str(path.relative_to(root))] = runs
    for path in chinese:
        text = "\n".join(msgstrs(path.read_text(encoding="utf-8")))
        if runs := shared_chinese(text, prints):
            found[str(path.relative_to(root))] = runs
    return found


def _seed_texts(folder: Path) -> list[str]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if not files:
        msg = f"{folder}: no source files to fingerprint"
        raise SystemExit(msg)
    return [p.read_text(encoding="utf-8") for p in files]


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    if argv and argv[0] == "--scan":
        prints = (
            fingerprints(_seed_texts(Path(argv[1])))
            if len(argv) > 1
            else read_fingerprints(root / "tests" / "seed_fingerprints.bin")
        )
        found = scan(root, prints)
        for name, runs in found.items():
            print(f"{len(runs):3d} {name}")
            for run in runs:
                print("      ", run)
        print(f"{sum(map(len, found.values()))} shared runs in {len(found)} files")
        return 1 if found else 0
    if len(argv) != 2:
        raise SystemExit(__doc__)
    prints = fingerprints(_seed_texts(Path(argv[0])))
    write_fingerprints(prints, Path(argv[1]))
    print(f"{len(prints)} fingerprints written to {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
