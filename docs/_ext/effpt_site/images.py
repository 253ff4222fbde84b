"""Pictures sized to the space they fill, so that no phone decodes more pixels than it shows.

sphinx-gallery saves each figure twice, at 1x and 2x, and marks them ``1x, 2x``: a
phone, whose screens have 1.75 to 3 device pixels per CSS pixel, takes the 2x file
even where the figure is squeezed to the width of the phone. Here each figure offers
its two files by width, with ``sizes`` saying how wide it is shown, so the browser
takes the 1x file wherever that is sharp enough: on a phone, whose column is about
380 CSS pixels wide, the 1x file of a figure saved 800 pixels wide. (A figure resampled to
widths in between compresses worse than either file: matplotlib's flat colours make
small PNGs, and resampling blurs them.) Every picture states its width and height
(no layout shift while it loads) and is fetched lazily, when it nears the screen.

The landing page's cards and sphinx-gallery's own gallery pages show thumbnails 160
CSS pixels wide; they are offered at 160, 320 and 400 pixels (sphinx-gallery's file).
The resized files are the same in both editions: the first edition built keeps each
under docs/_build/effpt-resized, named by the hash of what it is made from, and the
other copies it (:func:`resized`).
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
from pathlib import Path

from docutils import nodes

from effpt_site.kept import prune_unused, store

#: The widest a figure is shown: the theme's article column, in CSS pixels.
ARTICLE_PX = 880
#: Gutter of the article on a narrow screen (the theme's 1rem padding each side), px.
GUTTER_PX = 32


def _resized_key(source: bytes, width: int) -> str:
    """The hash of what a resized file is made from: the picture's bytes, the width, this
    module's code and Pillow's version."""
    import PIL  # noqa: PLC0415

    digest = hashlib.sha256(f"{width} {PIL.__version__}\0{_CODE}\0".encode())
    digest.update(source)
    return digest.hexdigest()


#: This module's code, hashed once (a thumbnail's key reads it for every resize).
_CODE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def resized(source: Path, target: Path, width: int, shared: Path | None = None) -> tuple[int, int]:
    """Write ``source`` scaled to ``width`` pixels wide at ``target`` (once); its size.

    With ``shared`` (a folder under docs/_build, ``effpt_resized_dir``), the file is also
    kept there under the hash of what it is made from (:func:`_resized_key`): the other
    edition, which shows the same thumbnails, copies it instead of resizing again, and a
    picture with other pixels, another width or other code is made anew.
    """
    from PIL import Image  # noqa: PLC0415  (docs-only dependency)

    if target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
        with Image.open(target) as done:
            return done.size
    target.parent.mkdir(parents=True, exist_ok=True)
    kept = None
    if shared is not None:
        kept = shared / f"{_resized_key(source.read_bytes(), width)}{target.suffix}"
        try:
            with Image.open(kept) as done:
                size = done.size
        except (OSError, ValueError):
            pass  # none yet, or unreadable: made again
        else:
            shutil.copyfile(kept, target)
            os.utime(kept)  # used by this build (see _prune_resized)
            return size
    with Image.open(source) as image:
        height = round(image.height * width / image.width)
        small = image.resize((width, height), Image.Resampling.LANCZOS)
    small.save(target, optimize=True)
    if kept is not None:
        store(kept, target.read_bytes())
    return small.size


def image_size(path: Path) -> tuple[int, int]:
    from PIL import Image  # noqa: PLC0415  (docs-only dependency)

    with Image.open(path) as image:
        return image.size


def sizes_for(width_px: int) -> str:
    """The ``sizes`` of a picture shown at ``width_px`` CSS pixels at most.

    >>> sizes_for(640)
    '(max-width: 672px) calc(100vw - 32px), 640px'
    """
    shown = min(width_px, ARTICLE_PX)
    return f"(max-width: {shown + GUTTER_PX}px) calc(100vw - {GUTTER_PX}px), {shown}px"


def img_tag(candidates: list[tuple[str, int]], height_ratio: float, shown_px: int, **attrs) -> str:
    """An ``<img>`` offering ``candidates`` (uri, pixel width) for a ``shown_px`` slot."""
    candidates = sorted(set(candidates), key=lambda c: c[1])
    smallest = next((c for c in candidates if c[1] >= shown_px), candidates[-1])
    srcset = ", ".join(f"{uri} {width}w" for uri, width in candidates)
    fields = {
        "src": smallest[0],
        "srcset": srcset,
        "sizes": attrs.pop("sizes"),
        "width": str(shown_px),
        "height": str(round(shown_px * height_ratio)),
        "loading": attrs.pop("loading", "lazy"),
        "decoding": "async",
        **attrs,
    }
    # An empty alt marks a decorative picture and must be written; other empty fields not.
    text = " ".join(
        f'{k}="{html.escape(v, quote=True)}"' for k, v in fields.items() if v or k == "alt"
    )
    return f"<img {text} />"


# -- sphinx-gallery's figures ---------------------------------------------------------------


def visit_figure_html(self, node) -> None:
    """HTML for sphinx-gallery's ``image-sg`` node: width-described candidates, lazy."""
    from sphinx_gallery.directives import _copy_images  # noqa: PLC0415

    if node["srcset"] is None:
        self.visit_image(node)
        return
    imagedir, srcset = _copy_images(self, node)
    page_dir = (Path(self.builder.outdir) / self.builder.current_docname).parent
    prefix = Path(os.path.relpath(imagedir, page_dir)).as_posix() + "/"
    files = {mult: imagedir / Path(path).name for mult, path in srcset.items()}
    one_x = files.get(0) or files.get(1.0) or next(iter(files.values()))
    width, height = image_size(one_x)
    candidates = [(prefix + path.name, image_size(path)[0]) for path in files.values()]
    classes = " ".join(node["class"] or [])
    self.body.append(
        img_tag(
            candidates,
            height / width,
            width,
            sizes=sizes_for(width),
            alt=node["alt"],
            **{"class": classes},
        )
    )


def depart_figure_html(self, node) -> None:  # noqa: ARG001  (Sphinx's visitor signature)
    return


# -- the landing page's card pictures -------------------------------------------------------


class card_picture(nodes.General, nodes.Element):
    """A thumbnail shown ``width`` CSS pixels wide, linking to the page ``target``.

    ``source`` is the picture's file in the sources; ``alt`` its text alternative.
    """


#: Widths written for a card's thumbnail, as multiples of its shown width.
CARD_DENSITIES = (1, 2)


def visit_card_picture_html(self, node) -> None:
    source = Path(node["source"])
    shown = node["width"]
    imagedir = Path(self.builder.outdir) / self.builder.imagedir
    page_dir = (Path(self.builder.outdir) / self.builder.current_docname).parent
    prefix = Path(os.path.relpath(imagedir, page_dir)).as_posix() + "/"
    full_width, full_height = image_size(source)
    candidates = [(prefix + source.name, full_width)]
    imagedir.mkdir(parents=True, exist_ok=True)
    target = imagedir / source.name
    if not target.is_file() or target.stat().st_mtime < source.stat().st_mtime:
        target.write_bytes(source.read_bytes())
    for density in CARD_DENSITIES:
        width = shown * density
        if width < full_width:
            name = f"{source.stem}_{width}w{source.suffix}"
            shared = Path(self.builder.srcdir) / self.builder.config.effpt_resized_dir
            resized(source, imagedir / name, width, shared)
            candidates.append((prefix + name, width))
    tag = img_tag(
        candidates,
        full_height / full_width,
        shown,
        sizes=f"{shown}px",
        alt=node["alt"],
        loading="lazy" if node.get("lazy", True) else "eager",
        **{"class": " ".join(node.get("classes") or ["effpt-card-picture"])},
    )
    if node.get("target"):
        # The card's title links to the same page; this second link is for the pointer
        # only, so keyboards and screen readers meet each family once.
        href = self.builder.get_relative_uri(self.builder.current_docname, node["target"])
        tag = f'<a href="{html.escape(href)}" tabindex="-1" aria-hidden="true">{tag}</a>'
    self.body.append(tag)


def depart_card_picture_html(self, node) -> None:  # noqa: ARG001
    return


#: sphinx-gallery's thumbnails (400 x 280 px), which its gallery pages show at 160 x 112.
THUMBNAIL = re.compile(r"/images/thumb/sphx_glr_[^/]+_thumb\.png$")
THUMBNAIL_PX = 160


def thumbnails_by_width(app, doctree) -> None:
    """doctree-read hook: gallery index thumbnails become pictures offered by width."""
    for image in list(doctree.findall(nodes.image)):
        uri = image.get("uri", "")
        if not THUMBNAIL.search("/" + uri):
            continue
        source = Path(app.srcdir) / uri.lstrip("/")
        if not source.is_file():
            continue
        picture = card_picture(
            source=str(source), width=THUMBNAIL_PX, alt=image.get("alt", ""), lazy=True
        )
        picture["classes"] = ["sphx-glr-thumbnail-picture"]
        image.replace_self(picture)


def _skip(self, node) -> None:  # noqa: ARG001
    raise nodes.SkipNode


def _prune_resized(app, exception) -> None:
    """build-finished: remove the kept thumbnails no build has used for a month."""
    if exception is None:
        prune_unused(Path(app.srcdir) / app.config.effpt_resized_dir)


def setup(app) -> None:
    from sphinx_gallery.directives import (  # noqa: PLC0415
        depart_imgsg_latex,
        imgsgnode,
        visit_imgsg_latex,
    )

    app.add_node(
        imgsgnode,
        override=True,
        html=(visit_figure_html, depart_figure_html),
        latex=(visit_imgsg_latex, depart_imgsg_latex),
    )
    app.add_node(
        card_picture,
        html=(visit_card_picture_html, depart_card_picture_html),
        latex=(_skip, None),
        text=(_skip, None),
        man=(_skip, None),
        texinfo=(_skip, None),
    )
    app.connect("doctree-read", thumbnails_by_width)
    # Relative to the source folder: shared by the English and the Chinese output.
    app.add_config_value("effpt_resized_dir", "_build/effpt-resized", "")
    app.connect("build-finished", _prune_resized)
