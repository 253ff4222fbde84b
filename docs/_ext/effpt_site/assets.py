"""What each page loads: one pruned stylesheet, deferred scripts, nothing a page does not use.

On a phone over a slow connection, a page cannot paint until every stylesheet and
every script in its head has arrived. The theme and the extensions link eleven
stylesheets (the theme's is 378 KB, most of it rules no page here uses), six
scripts that block rendering, the search index and an icon script. This module:

* links one stylesheet, ``_static/effpt-site.css``, written when the build finishes:
  Sphinx's basic styles, the theme's and every extension's sheet, in the order the
  theme would link them, without the rules no page of the site can match
  (:mod:`effpt_site.cssprune`), with the icon font cut to the icons pages show
  (:mod:`effpt_site.icons`);
* defers every script (inline ones become modules, which run deferred, in order, after
  the scripts they use), and drops a script from the pages that lack what it works on:
  the copy button where a page has no code block, sphinx-gallery's tag filter where it
  has no tags;
* leaves the search page as it is: it is the one page that needs the search index.

The template half of this lives in docs/_templates/layout.html. Remote stylesheets and
page-specific ones an extension adds for a single page keep their own links.

Nothing the build wrote is edited: pages get their links at ``html-page-context``, and
``effpt-site.css`` is a new file made from the built sheets (which stay as they are),
since which rules survive depends on every page of the finished site. It is made again
only when its inputs changed: the sheets, the words of the site's pages and scripts, and
the code that prunes and cuts (:func:`stylesheet_inputs`); otherwise the one the last
build wrote, with its fonts, stays.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from sphinx.util import logging

from effpt_site import cssprune, icons

logger = logging.getLogger(__name__)

#: The one stylesheet every page links (written at build-finished).
STYLESHEET = "_static/effpt-site.css"
#: What the theme's own ``theme.css`` imports, first in the cascade.
BASIC = "_static/basic.css"
#: Scripts a page loads only when its HTML has what the script works on.
NEEDED_WHEN = {
    "_static/clipboard.min.js": 'class="highlight',
    "_static/copybutton.js": 'class="highlight',
    "_static/sg-tags.js": "sphx-glr-tag",
}
_URL = re.compile(r"""url\(\s*(['"]?)([^'")]+)\1\s*\)""")


def _filename(asset) -> str:
    return str(getattr(asset, "filename", asset) or "")


def _is_local(filename: str) -> bool:
    return bool(filename) and "://" not in filename and not filename.startswith("//")


def site_stylesheets(builder) -> list[str]:
    """The stylesheets every page links, as paths in the output, in cascade order."""
    assets = getattr(builder, "_orig_css_files", None) or builder._css_files
    ordered = sorted(assets, key=lambda css: getattr(css, "priority", 500))
    names = [_filename(css) for css in ordered if _is_local(_filename(css))]
    return list(dict.fromkeys([BASIC, *names]))


def _with_attributes(asset, **changes):
    attributes = {**asset.attributes, **changes}
    return type(asset)(asset.filename, priority=asset.priority, **attributes)


def page_assets(app, pagename, templatename, context, doctree) -> None:  # noqa: ARG001
    """html-page-context hook: one stylesheet link; deferred, pruned scripts."""
    if app.builder.format != "html" or "css_files" not in context:
        return
    bundled = set(site_stylesheets(app.builder))
    context["effpt_stylesheet"] = STYLESHEET
    context["css_files"] = [css for css in context["css_files"] if _filename(css) not in bundled]
    if pagename == "search":
        return  # Sphinx's search runs here and expects its scripts as they are.
    body = context.get("body", "")
    scripts = []
    for js in context.get("script_files", []):
        name = _filename(js)
        if not hasattr(js, "attributes"):
            scripts.append(js)
            continue
        marker = NEEDED_WHEN.get(name) if name else None
        if marker is not None and marker not in body:
            continue
        if not name:
            # An inline script that reads what a deferred one defines must wait for it.
            scripts.append(_with_attributes(js, type="module"))
        elif "async" in js.attributes or "defer" in js.attributes:
            scripts.append(js)
        else:
            scripts.append(_with_attributes(js, defer="defer"))
    context["script_files"] = scripts


def _rebase(css: str, source: Path, target_dir: Path, outdir: Path) -> str:
    """Rewrite relative ``url()`` references of ``source`` for a sheet in ``target_dir``."""

    def fix(match: re.Match) -> str:
        url = match.group(2).strip()
        if url.startswith(("data:", "#", "/")) or "://" in url:
            return match.group(0)
        path, _, rest = url.partition("?")
        resolved = (source.parent / path).resolve()
        if not resolved.is_relative_to(outdir.resolve()):
            return match.group(0)
        new = Path(os.path.relpath(resolved, target_dir.resolve())).as_posix()
        return f'url("{new}{"?" + rest if rest else ""}")'

    return _URL.sub(fix, css)


def site_words(outdir: Path, cache: Path | None = None) -> set[str]:
    """Every word of every page and script of the built site (what CSS rules may match).

    With a ``cache`` file, a file whose size and modification time are those recorded
    there is not read again: its recorded words stand for it.
    """
    try:
        known = json.loads(cache.read_text(encoding="utf-8")) if cache else {}
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    files: dict[str, list] = {}
    for pattern in ("**/*.html", "_static/**/*.js"):
        for path in outdir.glob(pattern):
            stat = path.stat()
            where = path.relative_to(outdir).as_posix()
            entry = known.get(where)
            if isinstance(entry, list) and entry[:2] == [stat.st_mtime_ns, stat.st_size]:
                files[where] = entry
            else:
                text = path.read_text(encoding="utf-8", errors="replace")
                files[where] = [stat.st_mtime_ns, stat.st_size, sorted(cssprune.words([text]))]
    if cache is not None and files != known:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(files), encoding="utf-8")
    return {word for entry in files.values() for word in entry[2]}


def build_stylesheet(sources: list[Path], outdir: Path, present: set[str]) -> str:
    """Concatenate, rebase and prune ``sources`` into the text of one stylesheet."""
    target_dir = (outdir / STYLESHEET).parent
    parts = []
    for source in sources:
        text = source.read_text(encoding="utf-8")
        parts.append(_rebase(text, source, target_dir, outdir))
    rules = [
        rule
        for rule in cssprune.parse("\n".join(parts))
        if rule.at_name not in {"charset", "import"}
    ]
    return '@charset "UTF-8";' + cssprune.serialize(cssprune.prune_rules(rules, present))


def stylesheet_inputs(sources: list[Path], outdir: Path, present: set[str]) -> str:
    """A hash of everything the stylesheet and its fonts are made from.

    The sheets' text and where they lie, the words pages and scripts use, the fonts the
    sheets may load, whether fonts can be cut here, and the code of this module,
    :mod:`effpt_site.cssprune` and :mod:`effpt_site.icons`.
    """
    digest = hashlib.sha256()
    for module in (__file__, cssprune.__file__, icons.__file__):
        digest.update(Path(module).read_bytes())
    digest.update(repr(icons._woff2_available()).encode())
    for source in sources:
        digest.update(str(source.relative_to(outdir)).encode() + b"\0" + source.read_bytes())
    for font in sorted(outdir.glob("_static/**/*.woff2")):
        if not font.name.startswith("effpt-icons-"):
            digest.update(str(font.relative_to(outdir)).encode() + b"\0" + font.read_bytes())
    digest.update("\n".join(sorted(present)).encode())
    return digest.hexdigest()


def _unchanged(record: Path, key: str, outdir: Path) -> bool:
    """Whether the last stylesheet written from inputs ``key`` is still there, as written."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        return data["inputs"] == key and all(
            hashlib.sha256((outdir / name).read_bytes()).hexdigest() == sha
            for name, sha in data["outputs"].items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def write_stylesheet(app, exception) -> None:
    """build-finished hook: write the site's one stylesheet and its icon font."""
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    names = site_stylesheets(app.builder)
    sources = [outdir / name for name in names]
    missing = [str(p.relative_to(outdir)) for p in sources if not p.is_file()]
    if missing:
        logger.warning("effpt: stylesheets to bundle are missing from the build: %s", missing)
        sources = [p for p in sources if p.is_file()]
    present = site_words(outdir, Path(app.doctreedir) / "effpt-site-words.json")
    key = stylesheet_inputs(sources, outdir, present)
    record = Path(app.doctreedir) / "effpt-stylesheet.json"
    if _unchanged(record, key, outdir):
        logger.info("effpt: %s: its inputs are unchanged; kept", STYLESHEET)
        return
    before = sum(p.stat().st_size for p in sources)
    static = (outdir / STYLESHEET).parent
    css = build_stylesheet(sources, outdir, present)
    css = icons.subset_icon_fonts(css, outdir / STYLESHEET)
    (outdir / STYLESHEET).write_text(css, encoding="utf-8")
    outputs = [STYLESHEET] + [
        f"{static.relative_to(outdir).as_posix()}/{name}"
        for name in sorted(set(re.findall(r"effpt-icons-[\w.-]+?\.woff2", css)))
    ]
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(
        json.dumps(
            {
                "inputs": key,
                "outputs": {
                    name: hashlib.sha256((outdir / name).read_bytes()).hexdigest()
                    for name in outputs
                },
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    logger.info(
        "effpt: %s: %d stylesheets, %.0f KB of rules cut to %.0f KB",
        STYLESHEET,
        len(sources),
        before / 1000,
        len(css.encode()) / 1000,
    )


def setup(app) -> None:
    # After the theme's own handler (priority 500), which adds the page's inline scripts.
    app.connect("html-page-context", page_assets, priority=900)
    # After every other build-finished hook: the theme rewrites pygments.css in its own.
    app.connect("build-finished", write_stylesheet, priority=900)
