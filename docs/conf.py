"""Sphinx configuration of Effective PyTorch.

The gallery (examples/ → auto_examples/) is executed at build time by sphinx-gallery;
the site's own extension, docs/_ext/effpt_site, holds the hooks it calls between
examples and everything the site adds around the gallery.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

import effpt
from effpt_site.hooks import memory_is_measured
from effpt_site.packages import SITE, install_command

project = "Effective PyTorch"
author = "The effpt developers"
copyright = "2026, The effpt developers"
release = effpt.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_gallery.gen_gallery",
    "sphinxext.opengraph",
    "effpt_site",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/**/*.ipynb"]
myst_enable_extensions = ["colon_fence", "deflist", "substitution"]
myst_heading_anchors = 3


myst_substitutions = {
    # effpt's version lives in src/effpt/__init__.py; the line takes it from there.
    "install_line": f"`{install_command()}`",
}

# -- HTML ------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "Effective PyTorch"
html_static_path = ["_static"]
# The site's own templates: asset loading, the search button's name, the language switch.
templates_path = ["_templates"]
# The hosted site: every page's canonical link and the sitemap's addresses.
html_baseurl = SITE
# Open Graph tags for link previews (sphinxext-opengraph). Their address is html_baseurl's
# and their description each page's summary (docs/_ext/effpt_site/seo.py). No drawn
# social cards: the font they are drawn in has no Chinese characters. The template writes
# the description meta tag, also on pages the library leaves alone (the index, search).
ogp_social_cards = {"enable": False}
ogp_enable_meta_description = False
REPOSITORY = "https://github.com/effpt/effpt"
#: Where "Report a problem" opens an issue, and whose branch Colab opens notebooks from.
effpt_repository = REPOSITORY
#: The branch the Pages workflow publishes the gallery's notebooks to (.github/workflows/pages.yml).
effpt_notebooks_branch = "notebooks"
html_theme_options = {
    # The same page in the other language, beside the theme's own switches.
    "navbar_end": ["language-switch", "theme-switcher", "navbar-icon-links"],
    "navigation_with_keys": False,
    "github_url": REPOSITORY,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    # A gallery page's notebook in Colab, beside the breadcrumbs; a link to report a
    # problem under every page (docs/_ext/effpt_site/reader_links.py).
    "article_header_end": ["effpt-colab"],
    "article_footer_items": ["effpt-related", "effpt-report"],
}
html_show_sourcelink = False
html_context = {"default_mode": "auto"}
# Single pages with nothing to navigate: no empty left sidebar.
html_sidebars = {"index": [], "measurements": [], "execution_times": []}
html_favicon = "_static/favicon.svg"
html_last_updated_fmt = "%Y-%m-%d"

# -- autodoc ---------------------------------------------------------------------------
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
napoleon_numpy_docstring = True
napoleon_google_docstring = False

# -- intersphinx: on when the inventories can be fetched, off (one log line) when not --
INVENTORIES = {
    "python": ("https://docs.python.org/3", None),
    "torch": ("https://docs.pytorch.org/docs/stable", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "matplotlib": ("https://matplotlib.org/stable", None),
}


def _inventories_reachable() -> tuple[bool, str]:
    """EFFPT_INTERSPHINX=1/0 forces the choice; otherwise probe one inventory quickly."""
    forced = os.environ.get("EFFPT_INTERSPHINX", "").strip().lower()
    if forced in {"1", "on", "yes"}:
        return True, "EFFPT_INTERSPHINX is on"
    if forced in {"0", "off", "no"}:
        return False, "EFFPT_INTERSPHINX is off"
    url = INVENTORIES["python"][0] + "/objects.inv"
    try:
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=5):
            return True, f"{url} is reachable"
    except OSError as exc:
        return False, f"{url} is unreachable ({getattr(exc, 'reason', exc)})"


API_LINKS, _why = _inventories_reachable()
intersphinx_mapping = INVENTORIES if API_LINKS else {}
intersphinx_timeout = 10
if not API_LINKS:
    print(f"effpt: API links to Python/torch/NumPy/matplotlib docs are OFF: {_why}.")

effpt_api_links = API_LINKS

# Where workers start by forkserver (Linux from Python 3.14), each would import torch
# afresh; preloading it in the server makes the data pages as fast as under fork.
multiprocessing.set_forkserver_preload(["torch", "effpt.data"])

# -- sphinx-gallery --------------------------------------------------------------------
FAMILIES = [
    "basics",
    "broadcasting",
    "compilation",
    "numerics",
    "data",
    "amp",
    "training",
    "debugging",
    "performance",
    "memory",
]
EXAMPLES = ROOT / "examples"

#: The lesson families present, in reading order (effpt_site reads this too).
effpt_families = [f for f in FAMILIES if (EXAMPLES / f).is_dir()]

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    # Reading order of the lesson families (paths relative to this folder).
    "subsection_order": [f"../examples/{f}" for f in effpt_families],
    "within_subsection_order": "effpt_site.layout.ReadingOrder",
    "nested_sections": True,
    "image_srcset": ["2x"],
    "remove_config_comments": True,
    # torch too: docs/torch_index.md lists the torch names pages use (effpt_site.related).
    "doc_module": ("effpt", "torch"),
    "backreferences_dir": "gen_modules/backreferences",
    # The page's run stamp (effpt_site.decorations) says how long it ran and, on CUDA,
    # its peak GPU memory (measured by effpt_site.hooks); sphinx-gallery's own lines
    # would repeat it in English, as text for translators.
    "show_memory": False,
    "min_reported_time": float("inf"),
    "reset_modules": ("matplotlib", "effpt_site.hooks.reset_state"),
    "reset_modules_order": "both",
    # The notebook's first cell runs the install line every page states (effpt from the
    # site's own packages/ folder, effpt_site.packages).
    "first_notebook_cell": f"%{install_command()}\n%matplotlib inline",
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "capture_repr": ("__repr__",),
    # sphinx-gallery's own timing pages load scripts from CDNs; execution_times.md
    # shows the same figures without them.
    "write_computation_times": False,
}

# sphinx_gallery_conf holds functions once sphinx-gallery has filled it in, which Sphinx
# cannot pickle into its environment cache; that is expected and harmless.
suppress_warnings = ["config.cache"]

nitpicky = True

# Examples deliberately not executed by this build, with the reason shown on the page.
# Any other example that reports zero execution time fails the build.
effpt_not_executed: dict[str, str] = {}
#: Issue 40: no page over 1,800 words of prose, no paragraph over 120 (page_checks).
effpt_check_prose_length = True


# -- linkcheck: external links are reported, not required (an offline run says "broken") --
linkcheck_timeout = 5
linkcheck_retries = 1
linkcheck_workers = 8

effpt_memory_measured = memory_is_measured()

# -- the Chinese edition ---------------------------------------------------------------
# `nox -s docs` builds English, then Chinese (-D language=zh_CN) from the same executed
# pages; `nox -s translations` refreshes the catalogues translators edit.
locale_dirs = ["locale/"]
gettext_compact = False  # one catalogue per page, so a page's coverage is its own
gettext_uuid = False
gettext_location = False  # no source line numbers: they would churn every catalogue
#: CI fails when less of the Chinese edition than this is translated (see effpt_site.i18n).
effpt_translation_threshold = 0.95
