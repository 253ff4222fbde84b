"""The site in each language: this extension's own strings, and the translated build's settings.

The pages' text is translated the standard way: ``nox -s translations`` runs Sphinx's
gettext builder and ``sphinx-intl``, translators edit docs/locale/zh_CN/LC_MESSAGES/*.po,
and ``nox -s docs`` builds the Chinese site from the same executed pages (nothing runs
twice). This module holds what that pipeline lacks:

* the strings this extension writes itself (the run stamp, the torch badge, table
  headers, the theme's texts): English in the code, passed to :func:`translate` (or
  marked with :func:`N_` where they are defined), and translated in their own catalogue,
  docs/locale/<language>/LC_MESSAGES/effpt_site.po, which ``nox -s translations``
  refreshes from the code (:mod:`effpt_site.messages`); volatile text such as dates,
  machines and timings is rendered by directives whose nodes are never extracted as
  messages (:func:`freeze`);
* the theme's visible option texts and Chinese search, per language;
* the API reference's docstrings stay English (they are effpt's own documentation).

The catalogues' checks are in :mod:`effpt_site.catalogues`, the coverage count and the
"still English" note in :mod:`effpt_site.coverage`, the gallery's cards in
:mod:`effpt_site.thumbnails`.
"""

from __future__ import annotations

import gettext
import hashlib
import importlib.metadata
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.errors import ExtensionError

from effpt_site.catalogues import Coverage, check_catalogue, read_catalogue
from effpt_site.messages import DOMAIN


def N_(text: str) -> str:
    """Mark ``text`` for the catalogue where it is defined; :func:`translate` shows it later."""
    return text


#: Languages of the site, with the name a reader looks for in the switch (its own name
#: for itself, the same in every edition: not a translation).
LANGUAGES = {"en": "English", "zh_CN": "中文"}

#: The language switch's title, per language it leads to, said in that language.
SWITCH_TITLES = {"en": N_("Read this page in English"), "zh_CN": N_("Read this page in Chinese")}

#: Where each language's catalogue of this extension's strings lives.
LOCALE = Path(__file__).resolve().parents[2] / "locale"


def catalogue_of(language: str) -> Path:
    """The catalogue of this extension's strings in ``language``."""
    return LOCALE / language / "LC_MESSAGES" / f"{DOMAIN}.po"


_TABLES: dict[str, dict[str, str] | None] = {}


def _table(language: str) -> dict[str, str] | None:
    """English to ``language`` ("" where untranslated or fuzzy); None without a catalogue."""
    if language not in _TABLES:
        path = catalogue_of(language)
        _TABLES[language] = (
            {
                entry.id: entry.string if entry.string and not entry.fuzzy else ""
                for entry in read_catalogue(path)
                if entry.id
            }
            if path.is_file()
            else None
        )
    return _TABLES[language]


def translate(language: str | None, text: str, **values: object) -> str:
    """``text`` in ``language``, from its catalogue, then formatted.

    English where the language has no catalogue or the catalogue has not translated
    ``text`` yet (the build's coverage counts that); a string missing from the catalogue
    fails, naming it: ``nox -s translations`` adds it.

    Examples
    --------
    >>> translate("zh_CN", "Verified on a CPU with torch {versions}", versions="2.13.0")
    '已在 CPU 上用 torch 2.13.0 验证'
    >>> translate("fr", "Verified on a CPU with torch {versions}", versions="2.13.0")
    'Verified on a CPU with torch 2.13.0'
    >>> translate("zh_CN", "Not in the catalogue")
    Traceback (most recent call last):
    ...
    sphinx.errors.ExtensionError: .../effpt_site.po lacks the extension's string 'Not in the catalogue': run `nox -s translations` and translate it
    """
    table = None if (language or "en") == "en" else _table(language)
    if table is None:
        return text.format(**values)
    if text not in table:
        msg = (
            f"{catalogue_of(language)} lacks the extension's string {text!r}: run "
            "`nox -s translations` and translate it"
        )
        raise ExtensionError(msg)
    return (table[text] or text).format(**values)


def translate_data(language: str | None, text: str) -> str:
    """``text`` that comes from a run (an expectation's statement), in ``language`` if known.

    Such text is not in the code: :func:`effpt_site.messages.template` adds what the
    evidence records hold. Text no catalogue has yet (a page's new statement) stays
    English, as an untranslated entry does, instead of failing the build.

    Examples
    --------
    >>> translate_data("zh_CN", "a statement no record holds")
    'a statement no record holds'
    """
    table = None if (language or "en") == "en" else _table(language)
    return (table or {}).get(text) or text


def translator(language: str | None) -> Callable[..., str]:
    """``t(text, **values)``: :func:`translate` into ``language``.

    Bind it to a local named ``t``: :mod:`effpt_site.messages` extracts the strings of
    every ``t("...")`` call.

    Examples
    --------
    >>> t = translator("zh_CN")
    >>> t("Verified on a CPU with torch {versions}", versions="2.6.0")
    '已在 CPU 上用 torch 2.6.0 验证'
    """
    return partial(translate, language)


def catalogue_coverage(language: str) -> Coverage | None:
    """How much of this extension's catalogue in ``language`` is translated."""
    path = catalogue_of(language)
    return check_catalogue(path) if path.is_file() else None


def language_of(app) -> str:
    """The language this build writes (``en`` when none is set)."""
    return app.config.language or "en"


def freeze(node: nodes.Node) -> nodes.Node:
    """Keep every text under ``node`` out of the translators' catalogues.

    For what a directive computes at build time (timings, dates, outcomes): such text
    would become a message that changes with every build. Its fixed words come from
    :func:`translate` instead.
    """
    for element in node.findall(nodes.TextElement):
        element["translatable"] = False
    return node


_LOOKUPS: dict[Path, dict[str, str]] = {}


def lookup(app, docname: str, message: str) -> str | None:
    """The translation of ``message`` in the catalogue of page ``docname``, if any.

    For text one page shows from another page's source (the landing page's family
    intros), so that it is translated once, in the page it belongs to.
    """
    language = language_of(app)
    if language == "en":
        return None
    path = Path(app.srcdir) / "locale" / language / "LC_MESSAGES" / f"{docname}.po"
    if path not in _LOOKUPS:
        table = {}
        if path.is_file():
            for entry in read_catalogue(path):
                if entry.id and entry.string and not entry.fuzzy:
                    table[" ".join(entry.id.split())] = entry.string
        _LOOKUPS[path] = table
    return _LOOKUPS[path].get(" ".join(message.split()))


def _keep_docstrings_english(app, doctree) -> None:  # noqa: ARG001  (Sphinx's signature)
    """doctree-read: the API reference's docstrings stay English in every edition.

    They are effpt's own documentation, the text ``help()`` prints; translating them
    would fork it. The reference's page titles and introductions are translated.
    """
    for element in doctree.findall(nodes.TextElement):
        if ":docstring of " in (element.source or ""):
            element["translatable"] = False
    # "Parameters", "Returns", "Raises": Sphinx writes these field names in the build's
    # language itself; they are not this site's messages.
    for element in doctree.findall(addnodes.desc_content):
        for name in element.findall(nodes.field_name):
            name["translatable"] = False


#: pydata-sphinx-theme's options that are text a reader sees (its English defaults).
THEME_OPTIONS = {"search_bar_text": N_("Search the docs ..."), "icon_links_label": N_("Icon Links")}

#: Texts pydata-sphinx-theme's templates show through ``_()`` that neither the theme's
#: nor Sphinx's catalogue translates into every language of the site: this extension's
#: catalogue supplies them (:class:`_ThemeTranslations`).
THEME_MESSAGES = (
    N_("Color mode"),
    N_("System Settings"),
    N_("Collapse Sidebar"),
    N_("Expand Sidebar"),
)


def _theme_text(app, config) -> None:  # noqa: ARG001  (Sphinx's signature)
    """config-inited: the theme's visible option texts in the build's language."""
    language = config.language or "en"
    if language == "en" or _table(language) is None:
        return
    options = {key: translate(language, text) for key, text in THEME_OPTIONS.items()}
    config.html_theme_options = {**config.html_theme_options, **options}


class _ThemeTranslations(gettext.NullTranslations):
    """:data:`THEME_MESSAGES` from this extension's catalogue, after every other catalogue."""

    def __init__(self, language: str) -> None:
        super().__init__()
        self.language = language

    def gettext(self, message: str) -> str:
        if message in THEME_MESSAGES:
            return translate(self.language, message)
        return super().gettext(message)


def _theme_messages(app) -> None:
    """builder-inited: the templates' translator falls back on this extension's catalogue."""
    language = language_of(app)
    if language != "en" and _table(language) is not None and app.translator is not None:
        app.translator.add_fallback(_ThemeTranslations(language))


def _jieba_version() -> str:
    """jieba's version ("none" where it is not installed: Sphinx then cuts nothing)."""
    try:
        return importlib.metadata.version("jieba")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _splits_key(dictionaries: list[str]) -> str:
    """What a recorded split depends on: jieba's and Sphinx's code, the dictionaries' bytes.

    jieba's own dictionary (loaded by jieba before anything is cut) and the ones
    Sphinx's Chinese search adds (by default the same file again) decide the words.
    """
    import sphinx  # noqa: PLC0415
    from sphinx.search import zh  # noqa: PLC0415

    digest = hashlib.sha256(f"{_jieba_version()} {sphinx.__version__}".encode())
    digest.update(Path(zh.__file__).read_bytes())
    for path in [zh.JIEBA_DEFAULT_DICT, *dictionaries]:
        digest.update(path.encode() + b"\0")
        digest.update(Path(path).read_bytes() if path and Path(path).is_file() else b"")
    return digest.hexdigest()


def splits_record(app) -> Path:
    """Where a Chinese build records its search splits (beside the catalogues' record)."""
    folder = Path(app.srcdir) / app.config.effpt_catalogue_record_dir
    return folder / f"effpt-search-splits-{language_of(app)}.json"


def chinese_search_language(record: Path | None = None):
    """Sphinx's Chinese search language, with a JavaScript stemmer that exists, made lazily.

    Sphinx 9.0 ends language_data.js with ``window.Stemmer = <language_name>Stemmer``,
    but Chinese search ships the English stemmer, so the Chinese pages' search stopped
    with "ChineseStemmer is not defined" and found nothing (sphinx-doc/sphinx#14229,
    fixed upstream by naming the class after the stemmer file). The subclass names its
    language after the stemmer it ships.

    Sphinx makes the language at every HTML build, and its constructor loads jieba's
    whole dictionary (seconds), also when no page is written and nothing is split. The
    subclass runs Sphinx's constructor with that load held back, and makes it before
    the first split jieba has to cut: the same dictionary, the same words, and no load
    when no text is new.

    The indexer splits every text node of a page, and sphinx-gallery makes each token of
    a code cell a node of its own: a cold Chinese build split ~150,000 texts, most of
    them seen before, and jieba's cut was a third of writing the pages. The subclass
    cuts each distinct text once; a text seen again gets the same words, and adds its
    Latin terms to those the stemmer consults, as Sphinx's split does. With ``record``
    (a JSON file under docs/_build, :func:`splits_record`), the words of every text
    are kept across builds (:meth:`save_splits` at the end of the build), for as long as
    jieba's and Sphinx's versions and the dictionaries' bytes are those they were cut
    with (:func:`_splits_key`): a Chinese build made again from nothing cuts only the
    texts that are new.
    """
    from sphinx.search import zh  # noqa: PLC0415  (needs jieba: docs only)

    stemmer = zh.SearchChinese.js_stemmer_rawcode.removesuffix("-stemmer.js").capitalize()

    class LazySearchChinese(zh.SearchChinese):
        language_name = stemmer

        def __init__(self, options: dict[str, str]) -> None:
            held: list[str] = []
            load, zh.jieba_load_userdict = zh.jieba_load_userdict, held.append
            try:
                super().__init__(options)
            finally:
                zh.jieba_load_userdict = load
            self._dictionaries = [(load, path) for path in held]
            self._splits: dict[str, tuple[list[str], list[str]]] = {}
            self._record, self._key, self._new = record, "", False
            if record is not None:
                self._key = _splits_key(held)
                try:
                    data = json.loads(record.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    data = {}  # none or unreadable: every text is cut, the file rewritten
                if isinstance(data, dict) and data.get("key") == self._key:
                    self._splits = {text: tuple(v) for text, v in data["splits"].items()}

        def split(self, input: str) -> list[str]:  # Sphinx's signature
            known = self._splits.get(input)
            if known is None:
                while self._dictionaries:
                    load, path = self._dictionaries.pop(0)
                    load(path)
                # Sphinx's own expression for the Latin terms its split records
                latin = [term.strip() for term in self.latin1_letters.findall(input)]
                known = self._splits[input] = (super().split(input), latin)
                self._new = True
            else:
                self.latin_terms.update(known[1])
            return list(known[0])

        def save_splits(self) -> None:
            """Write every text's words to the record, when this build cut a new one."""
            if self._record is None or not self._new:
                return
            self._record.parent.mkdir(parents=True, exist_ok=True)
            data = {"key": self._key, "splits": self._splits}
            self._record.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
            self._new = False

    return LazySearchChinese


def _language_switch(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context: the switch's link name and title, in the language it leads to."""
    other = "en" if language_of(app) != "en" else "zh_CN"
    context["effpt_switch_name"] = LANGUAGES[other]
    context["effpt_switch_title"] = translate(other, SWITCH_TITLES[other])


def _search_language(app, config) -> None:
    if (config.language or "en").startswith("zh"):
        app.add_search_language(chinese_search_language(splits_record(app)))


def _save_splits(app, exception) -> None:
    """build-finished: keep the search's splits for the next Chinese build."""
    indexer = getattr(app.builder, "indexer", None)
    if exception is None and hasattr(getattr(indexer, "lang", None), "save_splits"):
        indexer.lang.save_splits()


def setup(app) -> None:
    app.connect("config-inited", _theme_text)
    app.connect("builder-inited", _theme_messages)
    app.connect("html-page-context", _language_switch)
    app.connect("config-inited", _search_language)
    app.connect("build-finished", _save_splits)
    app.connect("doctree-read", _keep_docstrings_english, priority=400)
