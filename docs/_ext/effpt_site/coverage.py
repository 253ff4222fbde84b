"""How much of each translated page the catalogues translated, counted on the built pages.

A message whose English changed since it was translated, or whose translation is fuzzy,
counts as untranslated; so does an untranslated or fuzzy string of the extension's own
catalogue (effpt_site.po), whose strings every page shows. The build prints the share per language and fails below
``effpt_translation_threshold``; a translated page that still shows English passages
says so under its title, linking to the English page.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

from effpt_site.catalogues import CheckedCatalogues, Coverage, record_file
from effpt_site.i18n import catalogue_coverage, catalogue_of, language_of, translate

logger = logging.getLogger(__name__)


def page_coverage(doctree) -> Coverage:
    """How many of a translated page's messages the catalogues translated.

    Counted on the page as it is now, after Sphinx applied the catalogues: a message
    that changed in English since it was translated counts as untranslated.
    """
    from sphinx.util.nodes import extract_messages  # noqa: PLC0415

    total = translated = 0
    for node, _message in extract_messages(doctree):
        total += 1
        translated += bool(node.get("translated"))
    return Coverage(translated, 0, total)


def _count_page(app, doctree) -> None:
    """doctree-read: remember each translated page's coverage."""
    if language_of(app) == "en" or app.builder.name == "gettext":
        return
    if not hasattr(app.env, "effpt_coverage"):
        app.env.effpt_coverage = {}
    app.env.effpt_coverage[app.env.docname] = page_coverage(doctree)


def _merge_pages(app, env, docnames, other) -> None:  # noqa: ARG001  (Sphinx's signature)
    """env-merge-info: the counts of the pages a parallel reader (``-j N``) read."""
    counted = getattr(other, "effpt_coverage", {})
    if not hasattr(env, "effpt_coverage"):
        env.effpt_coverage = {}
    env.effpt_coverage.update({doc: counted[doc] for doc in docnames if doc in counted})


def _forget_page(app, env, docname: str) -> None:  # noqa: ARG001  (Sphinx's signature)
    getattr(env, "effpt_coverage", {}).pop(docname, None)


def own_coverage(app, language: str) -> Coverage | None:
    """The counts of the extension's own catalogue (``None`` when there is none).

    Taken from the record of catalogues that passed the check at the start of this build
    (:class:`effpt_site.catalogues.CheckedCatalogues`) when the catalogue's bytes are
    those it passed with; counted (and checked) anew otherwise.
    """
    path = catalogue_of(language)
    if not path.is_file():
        return None
    if getattr(app, "srcdir", None) is None:
        return catalogue_coverage(language)
    return CheckedCatalogues(record_file(app, language)).check(path, "rst")[0]


def _report_coverage(app, exception) -> None:
    """build-finished: print the share translated; fail below the threshold."""
    language = language_of(app)
    if exception is not None or language == "en" or app.builder.name == "gettext":
        return
    per_doc = getattr(app.env, "effpt_coverage", {})
    own = own_coverage(app, language) or Coverage(0, 0, 0)  # the extension's strings
    whole = Coverage(
        sum(c.translated for c in per_doc.values()) + own.translated,
        0,
        sum(c.total for c in per_doc.values()) + own.total,
    )
    stale = sorted(doc for doc, c in per_doc.items() if c.translated < c.total)
    logger.info(
        "effpt: %s translation: %.1f %% of %d messages translated and not fuzzy; "
        "%d of %d pages show some English%s; %d of the extension's %d strings translated (%s)",
        language,
        100 * whole.share,
        whole.total,
        len(stale),
        len(per_doc),
        f" ({', '.join(stale[:8])}{', ...' if len(stale) > 8 else ''})" if stale else "",
        own.translated,
        own.total,
        catalogue_of(language).name,
    )
    threshold = float(app.config.effpt_translation_threshold)
    if whole.share < threshold:
        msg = (
            f"the {language} translation covers {whole.share:.1%} of its messages, below "
            f"effpt_translation_threshold = {threshold:.0%}; run `nox -s translations` "
            "and translate what it lists"
        )
        raise ExtensionError(msg)


def _note_stale(app, doctree, docname: str) -> None:
    """doctree-resolved: say on a translated page that parts of it are still English."""
    if language_of(app) == "en":
        return
    coverage = getattr(app.env, "effpt_coverage", {}).get(docname)
    if coverage is None or coverage.translated == coverage.total:
        return
    language = language_of(app)
    missing = coverage.total - coverage.translated
    # The English site is the parent of this one: up to this site's root, then one more.
    english = "../" * (docname.count("/") + 1) + docname + ".html"
    note = nodes.container(classes=["effpt-stale"])
    paragraph = nodes.paragraph()
    paragraph += nodes.Text(
        translate(
            language,
            "This translation is older than the English page: {count} of its {total} "
            "passages are shown in English until they are translated.",
            count=missing,
            total=coverage.total,
        )
        + " "
    )
    paragraph += nodes.reference("", translate(language, "Read the English page"), refuri=english)
    note += paragraph
    sections = list(doctree.findall(nodes.section))
    target = sections[0] if sections else doctree
    index = next((i for i, child in enumerate(target) if isinstance(child, nodes.title)), -1)
    target.insert(index + 1, note)


def setup(app) -> None:
    # A string default, so that -D effpt_translation_threshold=0.5 can override it
    # (Sphinx converts -D values only for str, int, bool and list defaults).
    app.add_config_value("effpt_translation_threshold", "0.95", "env", types=(float, str))
    app.connect("doctree-read", _count_page, priority=600)
    app.connect("env-purge-doc", _forget_page)
    app.connect("env-merge-info", _merge_pages)
    app.connect("doctree-resolved", _note_stale)
    app.connect("build-finished", _report_coverage)
