"""Where to go next: related pages under each gallery page, and torch names to pages.

* "Related pages" at the foot of each gallery page come from sphinx-gallery's own
  recommender (TF-IDF over the scripts' words, nearest neighbours by cosine similarity;
  numpy only, offline). It is fitted here rather than through sphinx-gallery's
  ``recommender`` option, which writes thumbnail cards into the generated reST of the
  pages it executes (an unchanged page would keep none) under an English heading that
  would become a message in every page's catalogue. The links go to the template
  docs/_templates/effpt-related.html through the page context, titled as each page is
  titled in the build's language.
* The index of PyTorch names (``.. effpt-torch-index::``, on docs/torch_index.md) lists
  every ``torch`` name the gallery's code uses and the pages that use it, from the
  backreferences sphinx-gallery records (``doc_module`` includes ``"torch"``). Its
  words come from :mod:`effpt_site.i18n`, so the page has no message to translate.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections import defaultdict
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util.docutils import SphinxDirective

from effpt_site.i18n import freeze, language_of, translate
from effpt_site.layout import example_pages, examples_dir

#: How many related pages each gallery page lists.
RELATED = 3
#: Words in fewer pages than this, or in more than this share of them, say nothing of kinship.
MIN_DF = 2
MAX_DF = 0.8


def scripts(app) -> dict[str, Path]:
    """Each gallery page's docname and its script, in reading order."""
    root = examples_dir(app)
    return {
        doc: root / Path(doc).parent.name / f"{stem}.py" for stem, doc in example_pages(app).items()
    }


def recommend(
    paths: dict[str, Path], n: int = RELATED, cache: Path | None = None
) -> dict[str, list[str]]:
    """For each docname, the ``n`` docnames whose scripts read most alike (sphinx-gallery's recommender).

    With a ``cache`` file, the recommender is fitted again only when a script, the
    settings, sphinx-gallery's version or this module's code differ from those the
    answer kept there was fitted with.
    """
    import sphinx_gallery  # noqa: PLC0415  (docs only)
    from sphinx_gallery import recommender  # noqa: PLC0415

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(f"{sphinx_gallery.__version__} {n} {MIN_DF} {MAX_DF}".encode())
    for doc, path in sorted(paths.items()):
        digest.update(f"\0{doc}\0{path}\0".encode() + path.read_bytes())
    key = digest.hexdigest()
    try:
        kept = json.loads(cache.read_text(encoding="utf-8")) if cache else None
        if kept["inputs"] == key:
            return kept["related"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if len(paths) <= 1:
        found = {doc: [] for doc in paths}
    else:
        by_file = {str(path): doc for doc, path in paths.items()}
        model = recommender.ExampleRecommender(
            n_examples=min(n, len(paths) - 1), min_df=MIN_DF, max_df=MAX_DF
        )
        model.fit(list(by_file))
        found = {by_file[f]: [by_file[r] for r in model.predict(f)] for f in by_file}
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"inputs": key, "related": found}), encoding="utf-8")
    return found


def _fit(app) -> None:
    """builder-inited: fit the recommender once per build (or take its kept answer)."""
    app.effpt_related = recommend(scripts(app), cache=Path(app.doctreedir) / "effpt-related.json")


def add_related(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context: the related pages' titles and addresses, for the template."""
    related = getattr(app, "effpt_related", {}).get(pagename)
    if not related:
        return
    context["effpt_related_heading"] = translate(language_of(app), "Related pages")
    context["effpt_related"] = [
        (app.env.titles[doc].astext(), app.builder.get_relative_uri(pagename, doc))
        for doc in related
        if doc in app.env.titles
    ]


def public_torch_name(name: str) -> bool:
    """Whether ``name`` is a public name that torch answers to, as a reader would write it.

    sphinx-gallery records each object under several names, some of them private
    (``torch.nn.modules.loss._WeightedLoss``) or shortened past what exists
    (``torch.Adam`` for :class:`torch.optim.Adam`); only those a reader can type stay.

    Examples
    --------
    >>> [public_torch_name(n) for n in ("torch.optim.Adam", "torch.Adam", "torch.nn._ConvNd")]
    [True, False, False]
    """
    parts = name.split(".")
    if parts[0] != "torch" or any(part.startswith("_") for part in parts):
        return False
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def torch_uses(backrefs: dict[str, list[list[str]]], srcdir: str | Path) -> dict[str, list[str]]:
    """Public ``torch`` names and the pages using them, from backreferences_all.json.

    Examples
    --------
    >>> entry = ["plot_a.py", "/x/examples/fam", "/x/docs/auto/fam", "intro", "A"]
    >>> torch_uses({"torch.cat": [entry], "effpt.bench.compare": [entry]}, "/x/docs")
    {'torch.cat': ['auto/fam/plot_a']}
    """
    uses: dict[str, set[str]] = defaultdict(set)
    for name, entries in backrefs.items():
        if not public_torch_name(name):
            continue
        for fname, _src, target, *_ in entries:
            target_dir = Path(target).resolve().relative_to(Path(srcdir).resolve())
            uses[name].add((target_dir / Path(fname).stem).as_posix())
    return {name: sorted(docs) for name, docs in sorted(uses.items())}


class TorchIndex(SphinxDirective):
    """``.. effpt-torch-index::``: a titled section listing torch names and their pages."""

    has_content = False

    def run(self):
        env = self.env
        language = language_of(env)
        conf = env.config.sphinx_gallery_conf
        path = Path(env.srcdir, conf["backreferences_dir"], "backreferences_all.json")
        env.note_dependency(str(path))
        backrefs = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        uses = torch_uses(backrefs, env.srcdir)
        title = translate(language, "PyTorch functions and the pages that use them")
        section = nodes.section(ids=["torch-index"], names=["torch-index"])
        section += nodes.title(text=title)
        section += nodes.paragraph(
            text=translate(
                language,
                "Every name from torch that a gallery page's code calls or refers to, in "
                "alphabetical order, with the pages that use it ({count} names).",
                count=len(uses),
            )
        )
        table = nodes.bullet_list(classes=["effpt-torch-index"])
        for name, docs in uses.items():
            item = nodes.list_item()
            para = nodes.paragraph()
            para += nodes.literal(text=name)
            para += nodes.Text(translate(language, ": "))
            for i, doc in enumerate(docs):
                if i:
                    para += nodes.Text(translate(language, ", "))
                ref = addnodes.pending_xref(
                    "", refdomain="std", reftype="doc", reftarget="/" + doc, refexplicit=False
                )
                ref += nodes.inline(text=doc, classes=["xref", "std", "std-doc"])
                para += ref
            item += para
            table += item
        section += table
        return [freeze(section)]


def setup(app) -> None:
    app.add_directive("effpt-torch-index", TorchIndex)
    app.connect("builder-inited", _fit)
    app.connect("html-page-context", add_related)
