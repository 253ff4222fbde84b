"""Accessible names for the theme's markup, given where it is made.

Each fix names the axe-core rule it satisfies. The templates in docs/_templates carry
them: search-button-field.html names the search button by its text, and
sidebar-nav-bs.html hands the section navigation the theme builds to
:func:`named_toggles`. (Gallery cards are named where effpt_site.thumbnails makes them.)
"""

from __future__ import annotations

from effpt_site.i18n import language_of, translate

#: The name given to the sidebar's expand/collapse toggles (translated per language).
TOGGLE_NAME = "Show or hide this section's pages"


def named_toggles(navigation, name: str):
    """The theme's section navigation with each icon-only ``<summary>`` named ``name``.

    summary-name: the theme writes each toggle as ``<summary>`` holding only a chevron
    icon. ``navigation`` is what the theme's ``generate_toctree_html`` returns: its
    tree (BeautifulSoup), or, when the theme reuses the tree of a page beside this one,
    that tree written out, which is read back. A summary with text of its own (a
    caption the theme puts in it) is named by that text and left alone.

    Examples
    --------
    >>> str(named_toggles('<li><summary><span class="t"></span></summary></li>', "Show"))
    '<li><summary aria-label="Show"><span class="t"></span></summary></li>'
    """
    from bs4 import BeautifulSoup  # noqa: PLC0415  (the theme's dependency; docs only)

    if isinstance(navigation, BeautifulSoup):
        tree = navigation
    else:
        tree = BeautifulSoup(str(navigation), "html.parser")
    for summary in tree.find_all("summary"):
        if not summary.get_text(strip=True) and not summary.get("aria-label"):
            summary["aria-label"] = name
    return tree


def add_toggle_namer(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context: ``effpt_named_toggles`` for docs/_templates/sidebar-nav-bs.html."""
    name = translate(language_of(app), TOGGLE_NAME)
    context["effpt_named_toggles"] = lambda navigation: named_toggles(navigation, name)


def setup(app) -> None:
    app.connect("html-page-context", add_toggle_namer)
