"""The translation catalogues (docs/locale/<language>/LC_MESSAGES/*.po): read and checked.

Before a translated build every catalogue must parse, and every translation must keep
its English's reST markup (roles, inline literals, link targets) and stay valid reST: a
failure names the file and the line. :class:`Coverage` counts a catalogue's messages.

A catalogue's verdict depends only on its bytes, how it is read (``md`` or ``rst``) and
the checking code, so a translated build checks again only the catalogues whose bytes
changed since a build that passed them (:class:`CheckedCatalogues`, a file in
``effpt_catalogue_record_dir``, ``docs/_build`` by default: outside the language's
output and doctrees, so a translated build made from nothing, after its output was
removed, still finds it); the others keep the counts recorded then.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Coverage:
    """Messages of a catalogue: translated (and not fuzzy), fuzzy, and all of them."""

    translated: int
    fuzzy: int
    total: int

    @property
    def share(self) -> float:
        """Translated and not fuzzy, as a fraction of all messages (1.0 for none)."""
        return self.translated / self.total if self.total else 1.0


#: Inline reST markup that a translation must carry over unchanged: roles with their
#: targets, inline literals and hyperlink targets.
_MARKUP = re.compile(r":[\w:+-]+:`[^`]+`|``[^`]+``|`[^`<]*<[^>]+>`_")


def _markup(text: str) -> list[str]:
    """The inline markup of ``text`` that must survive translation, sorted.

    A role's shown text may change (``:doc:`Broadcasting </x>``` to a Chinese title),
    so only its target counts.

    Examples
    --------
    >>> _markup("See :func:`torch.sum` and ``x += y``, or :doc:`this page </a/b>`.")
    [':doc:/a/b', ':func:torch.sum', '``x += y``']
    """
    found = []
    for token in _MARKUP.findall(text):
        if token.startswith(":"):
            role, _, rest = token[1:].partition(":`")
            target = re.search(r"<([^>]+)>`$", rest)
            found.append(f":{role}:{target.group(1) if target else rest[:-1].lstrip('~!')}")
        elif token.startswith("``"):
            found.append(token)
        else:
            found.append(re.sub(r"^`[^`<]*", "`", token))
    return sorted(found)


def catalogues(srcdir: str | Path, language: str) -> list[Path]:
    """Every .po file of ``language`` under docs/locale."""
    folder = Path(srcdir) / "locale" / language / "LC_MESSAGES"
    return sorted(folder.rglob("*.po")) if folder.is_dir() else []


#: A line of a .po file: blank, a comment, a keyword with one closed string, or a
#: continuation string. Babel forgives an unclosed string by dropping it; we don't.
_PO_LINE = re.compile(
    r'^(?:\s*|#.*|(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+"(?:[^"\\]|\\.)*"\s*'
    r'|"(?:[^"\\]|\\.)*"\s*)$'
)


def read_catalogue(path: Path):
    """Parse one .po file; a syntax error fails the build naming the file and line."""
    from babel.messages.pofile import PoFileError, read_po  # noqa: PLC0415

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not _PO_LINE.match(line):
            msg = f"{path}:{number}: this translation catalogue cannot be read: {line!r} is not a .po line (an unclosed string?)"
            raise ExtensionError(msg)
    try:
        with path.open("rb") as f:
            return read_po(f, abort_invalid=True)
    except PoFileError as exc:
        line = exc.lineno + 1  # babel counts lines from 0
        msg = f"{path}:{line}: this translation catalogue cannot be read: {exc}"
        raise ExtensionError(msg) from exc


_ROLE = re.compile(r":[\w:+-]+:`([^`]+)`")


#: How :func:`rst_problems` asks docutils to parse: report nothing, stop on nothing.
RST_SETTINGS = {
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": False,
    "file_insertion_enabled": False,
    "raw_enabled": False,
}
_SETTINGS: list = []


def _rst_settings():
    """A fresh copy of the settings publish_doctree makes from :data:`RST_SETTINGS`.

    Made once: docutils builds them by parsing its whole option list, which costs
    several times more than parsing one message.
    """
    if not _SETTINGS:
        from docutils.core import Publisher  # noqa: PLC0415

        # publish_doctree's components, and its own processing of the overrides
        publisher = Publisher("standalone", "restructuredtext", "null")
        publisher.process_programmatic_settings(None, RST_SETTINGS, None)
        _SETTINGS.append(publisher.settings)
    return copy.copy(_SETTINGS[0])


def rst_problems(text: str) -> list[str]:
    """What docutils reports when it parses ``text`` as reST (roles read as literals).

    Examples
    --------
    >>> rst_problems("Call :func:`torch.compile` once.")
    []
    >>> rst_problems("调用 ``x``（一次）")[0]
    'Inline literal start-string without end-string.'
    """
    from docutils.core import publish_doctree  # noqa: PLC0415

    # Roles become inline literals: the same rules for where inline markup may start
    # and end, without touching the roles Sphinx has registered in this process.
    plain = _ROLE.sub(lambda m: "``" + m.group(1).replace("`", "") + "``", text)
    doctree = publish_doctree(plain, settings=_rst_settings())
    return [
        message.children[0].astext() if message.children else message.astext()
        for message in doctree.findall(nodes.system_message)
        if message["level"] >= 2
    ]


def check_catalogue(path: Path, syntax: str = "rst") -> Coverage:
    """Validate one catalogue's markup and count its messages.

    A translated message whose roles, literals or link targets differ from its English,
    or (for a page written in reST) that docutils cannot parse where its English parses,
    fails the build with the file and the line of the message.
    """
    catalog = read_catalogue(path)
    translated = fuzzy = total = 0
    for message in catalog:
        if not message.id:
            continue  # the header
        total += 1
        if message.fuzzy:
            fuzzy += 1
            continue
        if not message.string:
            continue
        if _markup(message.id) != _markup(message.string):
            lineno = message.lineno
            msg = (
                f"{path}:{lineno}: the translation's reST markup does not match its English "
                f"(English has {_markup(message.id)}, the translation {_markup(message.string)})"
            )
            raise ExtensionError(msg)
        if syntax == "rst":
            # The English is parsed only to tell a problem it already has from a new one:
            # a translation that parses cleanly adds none, whatever its English reports.
            new = set(rst_problems(message.string))
            if new:
                new -= set(rst_problems(message.id))
            if new:
                msg = (
                    f"{path}:{message.lineno}: the translation is not valid reST: "
                    f"{'; '.join(sorted(new))} (inline markup next to a full-width character "
                    "needs an escaped space, e.g. ``x``\\ （)"
                )
                raise ExtensionError(msg)
        translated += 1
    return Coverage(translated, fuzzy, total)


def syntax_of(srcdir: str | Path, catalogue: Path, language: str) -> str:
    """ "md" for a catalogue of a MyST page, else "rst" (gallery pages, API pages)."""
    root = Path(srcdir) / "locale" / language / "LC_MESSAGES"
    docname = catalogue.relative_to(root).with_suffix("")
    return "md" if (Path(srcdir) / docname).with_suffix(".md").is_file() else "rst"


def _checker_version() -> str:
    """What a recorded verdict was reached with: this module's code and docutils' and babel's versions."""
    import babel  # noqa: PLC0415
    import docutils  # noqa: PLC0415

    source = Path(__file__).read_bytes()
    return hashlib.sha256(
        source + f"{docutils.__version__} {babel.__version__}".encode()
    ).hexdigest()


class CheckedCatalogues:
    """The catalogues a build checked and passed: each one's hash, syntax and counts.

    Kept as JSON in ``path`` (beside Sphinx's doctrees). A catalogue is taken from
    here only when its bytes, its syntax and the checking code are those it passed
    with; a catalogue that fails is never recorded, so it fails again next time.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.version = _checker_version()
        self.entries: dict[str, dict] = {}
        if path is not None and path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}  # unreadable: everything is checked again and the file rewritten
            if isinstance(data, dict) and data.get("version") == self.version:
                self.entries = data.get("catalogues", {})

    def check(self, catalogue: Path, syntax: str) -> tuple[Coverage, bool]:
        """The catalogue's counts, and whether they were checked now (False: recorded)."""
        digest = hashlib.sha256(catalogue.read_bytes()).hexdigest()
        entry = self.entries.get(str(catalogue))
        if entry and entry["sha256"] == digest and entry["syntax"] == syntax:
            return Coverage(*entry["counts"]), False
        counts = check_catalogue(catalogue, syntax)
        self.entries[str(catalogue)] = {
            "sha256": digest,
            "syntax": syntax,
            "counts": [counts.translated, counts.fuzzy, counts.total],
        }
        return counts, True

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": self.version, "catalogues": self.entries}
        self.path.write_text(json.dumps(data, indent=0, sort_keys=True), encoding="utf-8")


def check_catalogues(srcdir: str | Path, language: str, record: Path | None = None) -> Coverage:
    """Check every catalogue of ``language``; return their message counts together.

    With ``record`` (a JSON file), catalogues it says passed with the same bytes are
    not checked again, and those checked now are added to it once all have passed.
    """
    checked = CheckedCatalogues(record)
    counts = []
    rechecked = 0
    for path in catalogues(srcdir, language):
        coverage, now = checked.check(path, syntax_of(srcdir, path, language))
        counts.append(coverage)
        rechecked += now
    if rechecked:
        checked.save()
    if record is not None:
        logger.info(
            "effpt: %d of %d %s catalogues checked (the others are unchanged since they passed)",
            rechecked,
            len(counts),
            language,
        )
    return Coverage(
        sum(c.translated for c in counts),
        sum(c.fuzzy for c in counts),
        sum(c.total for c in counts),
    )


def record_file(app, language: str) -> Path:
    """Where the catalogues of ``language`` that passed are recorded (see the module's text)."""
    folder = Path(app.srcdir) / app.config.effpt_catalogue_record_dir
    return folder / f"effpt-catalogues-{language}.json"


def _check_catalogues(app) -> None:
    """builder-inited: every catalogue of a translated build must parse and keep its markup."""
    language = app.config.language or "en"
    if language == "en" or app.builder.name == "gettext":
        return
    if not catalogues(app.srcdir, language):
        msg = f"no catalogues for language {language!r} under {Path(app.srcdir) / 'locale'}"
        raise ExtensionError(msg)
    record = record_file(app, language)
    counts = check_catalogues(app.srcdir, language, record)
    logger.info(
        "effpt: %s catalogues: %d messages, %d fuzzy (fuzzy ones are shown in English)",
        language,
        counts.total,
        counts.fuzzy,
    )


def setup(app) -> None:
    # Relative to the source folder; it holds only what passed, keyed on the bytes
    # checked and the checking code, so every output of the site may share it.
    app.add_config_value("effpt_catalogue_record_dir", "_build", "")
    app.connect("builder-inited", _check_catalogues)
