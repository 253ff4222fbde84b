"""What a reader can do from a page besides reading it: report a problem, open it in Colab.

* Every page links to a new issue of the repository, prefilled with the page's address,
  effpt's and torch's versions and the machine line of the build: for a gallery page
  the machine its output came from (its stamp, written by :mod:`effpt_site.hooks`),
  for any other page the machine that built the site.
* Every gallery page links to its notebook in Google Colab. The Pages workflow
  (.github/workflows/pages.yml) publishes the notebooks sphinx-gallery writes to the
  branch ``effpt_notebooks_branch`` of the repository, one folder per family, where
  Colab opens them by address. The notebook's first cell (``first_notebook_cell`` in
  docs/conf.py) installs effpt and keeps the torch Colab already has.

The addresses are made here and handed to the theme's templates
(docs/_templates/effpt-colab.html and effpt-report.html) through the page context;
their words come from :mod:`effpt_site.i18n`.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlencode

import effpt
from effpt.machine import Machine
from effpt_site import build_machine
from effpt_site.i18n import language_of, translate
from effpt_site.layout import example_pages, page_stem
from effpt_site.outputs import conf_of, read_stamp, stamp_file

COLAB = "https://colab.research.google.com/github"


def repository_path(repository: str) -> str:
    """``owner/name`` of a GitHub repository's address.

    Examples
    --------
    >>> repository_path("https://github.com/effpt/effpt/")
    'effpt/effpt'
    >>> repository_path("https://gitlab.com/a/b")
    Traceback (most recent call last):
    ...
    ValueError: effpt_repository must be a https://github.com/OWNER/NAME address, got 'https://gitlab.com/a/b'
    """
    prefix = "https://github.com/"
    parts = repository.removeprefix(prefix).strip("/").split("/")
    if not repository.startswith(prefix) or len(parts) != 2 or not all(parts):
        msg = (
            f"effpt_repository must be a https://github.com/OWNER/NAME address, got {repository!r}"
        )
        raise ValueError(msg)
    return "/".join(parts)


def notebook_path(docname: str, gallery_dir: str) -> str:
    """Where a gallery page's notebook lies in the published branch: ``family/plot_x.ipynb``.

    Examples
    --------
    >>> notebook_path("auto_examples/basics/plot_modules", "auto_examples")
    'basics/plot_modules.ipynb'
    """
    return docname.removeprefix(gallery_dir.rstrip("/") + "/") + ".ipynb"


def colab_url(repository: str, branch: str, notebook: str) -> str:
    """The address at which Colab opens ``notebook`` from ``branch`` of the repository.

    Examples
    --------
    >>> colab_url("https://github.com/effpt/effpt", "notebooks", "basics/plot_modules.ipynb")
    'https://colab.research.google.com/github/effpt/effpt/blob/notebooks/basics/plot_modules.ipynb'
    """
    path = quote(f"{branch}/{notebook}", safe="/")
    return f"{COLAB}/{repository_path(repository)}/blob/{path}"


def issue_url(
    repository: str,
    *,
    page: str,
    title: str,
    machine: str,
    language: str = "en",
    effpt_version: str = effpt.__version__,
    torch_version: str | None = None,
) -> str:
    """The address of a new issue prefilled with what a maintainer needs to reproduce.

    The fields stay English (maintainers triage them); the prompt is in the reader's
    language. Everything is percent-encoded, spaces as ``%20``.

    Examples
    --------
    >>> url = issue_url("https://github.com/effpt/effpt", page="https://x.io/a b.html",
    ...                 title="Tensors & views", machine="x86_64 CPU, 2 threads · torch 2.13.0",
    ...                 effpt_version="0.2.0", torch_version="2.13.0")
    >>> url.split("?")[0]
    'https://github.com/effpt/effpt/issues/new'
    >>> from urllib.parse import parse_qs, urlsplit
    >>> fields = parse_qs(urlsplit(url).query)
    >>> fields["title"]
    ['Problem on "Tensors & views"']
    >>> print(fields["body"][0])  # doctest: +NORMALIZE_WHITESPACE
    Page: https://x.io/a b.html
    effpt: 0.2.0
    torch: 2.13.0
    Machine of the build: x86_64 CPU, 2 threads · torch 2.13.0
    <BLANKLINE>
    What went wrong, and what did you expect?
    """
    if torch_version is None:
        import torch  # noqa: PLC0415  (only where a page is written: see effpt_site.hooks)

        torch_version = torch.__version__
    body = "\n".join(
        [
            f"Page: {page}",
            f"effpt: {effpt_version}",
            f"torch: {torch_version}",
            f"Machine of the build: {machine}",
            "",
            translate(language, "What went wrong, and what did you expect?"),
        ]
    )
    query = urlencode({"title": f'Problem on "{title}"', "body": body}, quote_via=quote)
    return f"https://github.com/{repository_path(repository)}/issues/new?{query}"


def page_machine(app, docname: str) -> str:
    """The machine a gallery page's output came from (its stamp), else the build's own."""
    stem = page_stem(app, docname)
    if stem is not None:
        conf = conf_of(app)
        stamp = read_stamp(conf, stem)
        if stamp is not None:
            return str(Machine.in_file(stamp, stamp_file(conf, stem)))
    return str(build_machine.machine(app)[0])


def add_links(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context: the report and Colab addresses, and their words, for the templates."""
    if app.builder.format != "html":
        return
    language = language_of(app)
    repository = app.config.effpt_repository
    base = app.config.html_baseurl.rstrip("/") + "/"
    title = str(context.get("title") or pagename)
    context["effpt_report_url"] = issue_url(
        repository,
        page=base + app.builder.get_target_uri(pagename),
        title=_plain(title),
        machine=page_machine(app, pagename),
        language=language,
        torch_version=build_machine.machine(app)[1],
    )
    context["effpt_report_text"] = translate(language, "Report a problem with this page")
    gallery = app.config.sphinx_gallery_conf["gallery_dirs"]
    if pagename in set(example_pages(app).values()):
        notebook = notebook_path(pagename, gallery)
        context["effpt_colab_url"] = colab_url(
            repository, app.config.effpt_notebooks_branch, notebook
        )
        context["effpt_colab_text"] = translate(language, "Run in Google Colab")


def _plain(title: str) -> str:
    """A page title as text (Sphinx hands templates HTML)."""
    return html.unescape(re.sub(r"<[^>]+>", "", title))


def setup(app) -> None:
    app.add_config_value("effpt_repository", "https://github.com/effpt/effpt", "html")
    app.add_config_value("effpt_notebooks_branch", "notebooks", "html")
    app.connect("html-page-context", add_links)
