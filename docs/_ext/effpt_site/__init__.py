"""The site's own Sphinx extension: everything around the gallery, one module per concern.

* :mod:`effpt_site.layout`: where families and pages live.
* :mod:`effpt_site.outputs`: the one reader of what executing a page left (records,
  expectations, claim outcomes, its stamp, sphinx-gallery's cost file).
* :mod:`effpt_site.hooks`: what sphinx-gallery calls around each example (state resets,
  the warning policy, memory on CUDA, the files pages record to, and the run stamp).
* :mod:`effpt_site.before_you_start`: the "before you start" box under each page's title.
* :mod:`effpt_site.cards`: the landing page's cards.
* :mod:`effpt_site.measurements`: every record, and each of the sources' claims
  (:mod:`effpt.claims`) with the outcome its page recorded.
* :mod:`effpt_site.expectations`: the grid of every expectation and claim on every
  machine measured, and the build log's list of those that did not hold here.
* :mod:`effpt_site.across_machines`: this build's run and the evidence records
  (``docs/evidence``, read by ``docs/_tools/evidence.py``) as the grid's columns, and
  how an expectation fared elsewhere.
* :mod:`effpt_site.verdict_box`: after each page output that prints expectations, a box
  with each one's bound, this build's value and verdict, and how it fared elsewhere.
* :mod:`effpt_site.page_checks`: checks that fail the build.
* :mod:`effpt_site.packages`: the wheel and sdist of effpt that the site serves, which
  every page's install line names; :mod:`effpt_site.downloads` writes that line into
  each downloadable script.
* :mod:`effpt_site.decorations`: each gallery page's torch badge and run stamp.
* :mod:`effpt_site.exec_times`: the execution-times page.
* :mod:`effpt_site.compat`: the compatibility page and each page's torch badge.
* :mod:`effpt_site.i18n`: this extension's own strings in each language, and the
  translated build's settings; :mod:`effpt_site.messages` extracts those strings into
  their gettext template; :mod:`effpt_site.catalogues` checks the catalogues,
  :mod:`effpt_site.coverage` counts what they translated, :mod:`effpt_site.thumbnails`
  makes the gallery's cards in the reader's language.
* :mod:`effpt_site.a11y`: accessible names for the theme's sidebar toggles.
* :mod:`effpt_site.api`: minigalleries in the API reference, offline API names.
* :mod:`effpt_site.assets`: what each page loads (one pruned stylesheet, deferred
  scripts), with :mod:`effpt_site.cssprune` and :mod:`effpt_site.icons`.
* :mod:`effpt_site.images`: pictures offered at the sizes they are shown.
* :mod:`effpt_site.plain_text`: a plain-text copy of every page, and ``llms.txt``.
* :mod:`effpt_site.reader_links`: "Report a problem" on every page, "Run in Google
  Colab" on every gallery page.
* :mod:`effpt_site.backrefs`: sphinx-gallery's backreference files, each example's
  thumbnail block made once instead of once per name it uses.
* :mod:`effpt_site.build_machine`: the machine that builds the site, for report links
  and ``effpt-build.json``, asked of torch only when something it depends on changed.
* :mod:`effpt_site.related`: related pages under each gallery page; torch names to pages.
* :mod:`effpt_site.seo`: each page's description, and the sitemap.
* :mod:`effpt_site.code_links`: sphinx-gallery's linked code cells, made once for both
  editions.
* :mod:`effpt_site.message_parsing`: the translation transform's debug texts, rendered
  only when shown.
* :mod:`effpt_site.collector`: the garbage collector, relaxed once the gallery has run.

The package imports effpt (the reader-facing library); effpt never imports it.
"""

from __future__ import annotations

import importlib

#: The extension's modules that register with Sphinx, each by its own ``setup``.
MODULES = (
    "a11y",
    "across_machines",
    "api",
    "assets",
    "backrefs",
    "before_you_start",
    "cards",
    "catalogues",
    "code_links",
    "collector",
    "compat",
    "coverage",
    "decorations",
    "downloads",
    "exec_times",
    "expectations",
    "i18n",
    "images",
    "measurements",
    "message_parsing",
    "messages",
    "packages",
    "page_checks",
    "plain_text",
    "reader_links",
    "related",
    "seo",
    "thumbnails",
    "verdict_box",
)


def setup(app):
    for name in MODULES:
        importlib.import_module(f"effpt_site.{name}").setup(app)
    app.add_config_value("effpt_families", [], "env")
    app.add_css_file("effpt.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
