"""What the site adds to every gallery page: the torch badge and the run stamp.

Both are doctree nodes added when a page has been read, in the build's language and
out of the translators' catalogues (their text changes with every run or matrix):

* the badge (:func:`effpt_site.compat.badge`) right under the page's title;
* sphinx-gallery's "Go to the end to download the full example code" note, which it puts
  above the title, moves below the "before you start" box (:func:`move_download_note`), so
  that a phone's first screen shows the title rather than the note; ``effpt.css`` draws it
  as one muted line;
* the stamp, when, on which machine and in how long the page ran (and, on CUDA, its
  peak GPU memory), or why it was not executed, where sphinx-gallery would write its
  running time: before the download footer.

sphinx-gallery's own running-time and memory lines are switched off in ``conf.py``
(``min_reported_time``, ``show_memory``): the stamp says the same in the reader's
language. The checks that fail the build on a gallery page are :mod:`effpt_site.page_checks`.
"""

from __future__ import annotations

from docutils import nodes

from effpt.machine import Machine
from effpt_site.compat import badge
from effpt_site.i18n import freeze, language_of, translate
from effpt_site.layout import page_stem
from effpt_site.outputs import conf_of, read_cost, read_stamp, stamp_file
from effpt_site.page_checks import not_executed_reason


def stamp_text(
    language: str, stamp: dict | None, seconds: float, reason: str | None, where: object = "stamp"
) -> str:
    """The stamp's sentence(s) in ``language``; ``where`` names the stamp in an error.

    Examples
    --------
    >>> from effpt.machine import Machine
    >>> cpu = Machine("cpu", "x86_64 CPU", 2, None, "2.13.0").to_dict()
    >>> when = {"executed_at": "2026-11-25 04:00 UTC", "machine": cpu}
    >>> stamp_text("en", when, 12.34, None)
    'Executed 2026-11-25 04:00 UTC on x86_64 CPU, 2 threads · torch 2.13.0 in 12.3 s.'
    >>> stamp_text("en", {**when, "gpu_peak_mib": 1536.4}, 12.34, None)  # doctest: +ELLIPSIS
    'Executed ... in 12.3 s. Peak GPU memory allocated by torch: 1536 MiB.'
    >>> stamp_text("en", None, 0.0, "this build executed no examples (--no-exec)")
    'Not executed in this build: this build executed no examples (--no-exec)'
    """
    if reason is not None:
        lines = [translate(language, "Not executed in this build: {reason}", reason=reason)]
    else:
        assert stamp is not None
        lines = [
            translate(
                language,
                "Executed {when} on {machine} in {seconds} s.",
                when=stamp["executed_at"],
                machine=str(Machine.in_file(stamp, where)),
                seconds=f"{seconds:.1f}",
            )
        ]
    if stamp is not None and "gpu_peak_mib" in stamp:
        mib = f"{stamp['gpu_peak_mib']:.0f}"
        lines.append(translate(language, "Peak GPU memory allocated by torch: {mib} MiB.", mib=mib))
    return " ".join(lines)


def _footer(doctree: nodes.document) -> nodes.target | None:
    """sphinx-gallery's download footer: the target ``sphx_glr_download_...`` it starts with."""
    for target in doctree.findall(nodes.target):
        # Its name moves to the footer's container (docutils' PropagateTargets); refid stays.
        if target.get("refid", "").startswith("sphx-glr-download-"):
            return target
    return None


def _drop_sphinx_gallery_timing(doctree: nodes.document) -> None:
    """Remove sphinx-gallery's running-time and memory lines from a page it generated
    before conf.py switched them off (it regenerates a page only when its script changes)."""
    for timing in list(doctree.findall(nodes.paragraph)):
        if "sphx-glr-timing" not in timing["classes"]:
            continue
        following = timing.next_node(siblings=True, descend=False)
        strong = following.next_node(nodes.strong) if following is not None else None
        if strong is not None and strong.astext() == "Estimated memory usage:":
            following.parent.remove(following)
        timing.parent.remove(timing)


def move_download_note(doctree: nodes.document, section: nodes.section) -> bool:
    """Move sphinx-gallery's download note from above the title to below the page's box.

    The note (``.. note::`` with the class ``sphx-glr-download-link-note``, inside an
    ``.. only:: html``) goes right after the "before you start" box, or after the badge
    when the page has no box. Returns whether it moved a note.
    """
    note = next(
        (n for n in doctree.findall(nodes.note) if "sphx-glr-download-link-note" in n["classes"]),
        None,
    )
    if note is None:
        return False
    moved = note.parent if note.parent.tagname == "only" else note
    if moved.parent is section:
        return False  # already below the title
    moved.parent.remove(moved)
    box = next(
        (
            child
            for child in section.children
            if "effpt-before-you-start" in child.get("classes", ())
        ),
        None,
    )
    section.insert(section.index(box) + 1 if box is not None else 2, moved)
    return True


def decorate(app, doctree) -> None:
    """doctree-read hook: a gallery page gets its badge under the title, its stamp at the end."""
    docname = app.env.docname
    stem = page_stem(app, docname)
    if stem is None:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    section.insert(1, badge(app, stem))
    move_download_note(doctree, section)
    _drop_sphinx_gallery_timing(doctree)
    cost = read_cost(app.srcdir, docname)
    seconds = cost.seconds if cost is not None else 0.0
    stamp = read_stamp(conf_of(app), stem)
    reason = not_executed_reason(app, docname, stem, seconds, stamp)
    where = stamp_file(conf_of(app), stem)
    text = stamp_text(language_of(app), stamp if reason is None else None, seconds, reason, where)
    # sphx-glr-timing: the class sphinx-gallery gives its own running-time line.
    paragraph = nodes.paragraph(classes=["effpt-stamp", "sphx-glr-timing"])
    paragraph += nodes.emphasis(text=text)
    footer = _footer(doctree)
    if footer is None:
        doctree.append(freeze(paragraph))
    else:
        footer.parent.insert(footer.parent.index(footer), freeze(paragraph))


def setup(app) -> None:
    app.connect("doctree-read", decorate)
