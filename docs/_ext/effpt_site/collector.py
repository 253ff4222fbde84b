"""The build's cyclic garbage collector, relaxed once the gallery has run.

Reading and writing the pages makes millions of docutils nodes that live until the
build ends, and each collection the default thresholds trigger walks those again: in a
cold Chinese pass of 87 pages (2-core AMD EPYC Zen 4, ``-j 2``) the collector took
~7 s of 31. From ``env-before-read-docs`` on, after sphinx-gallery has executed the
pages (it does so at ``builder-inited``, so no page runs under these settings), a young
collection waits for :data:`BUILD_THRESHOLDS` allocations instead of 700, and the
thresholds the build started with come back when it finishes. Nothing the build
writes depends on when garbage is collected; peak memory rose ~6 % (661 → 703 MB).
"""

from __future__ import annotations

import gc

#: ``gc.set_threshold`` while pages are read and written: a young collection every
#: 100,000 allocations, an older one every 50 of those, the oldest every 100 of those.
BUILD_THRESHOLDS = (100_000, 50, 100)


def relax(app, env, docnames) -> None:  # noqa: ARG001  (env-before-read-docs)
    """Keep the thresholds the build started with, and set :data:`BUILD_THRESHOLDS`.

    Examples
    --------
    >>> before = gc.get_threshold()
    >>> class App: pass
    >>> app = App(); relax(app, None, []); gc.get_threshold()
    (100000, 50, 100)
    >>> restore(app, None); gc.get_threshold() == before
    True
    """
    if not hasattr(app, "_effpt_thresholds"):  # a second read (Sphinx rereads) keeps the first
        app._effpt_thresholds = gc.get_threshold()
    gc.set_threshold(*BUILD_THRESHOLDS)


def restore(app, exception) -> None:  # noqa: ARG001  (build-finished)
    """Put back the thresholds :func:`relax` found."""
    thresholds = getattr(app, "_effpt_thresholds", None)
    if thresholds is not None:
        gc.set_threshold(*thresholds)
        del app._effpt_thresholds


def setup(app) -> None:
    app.connect("env-before-read-docs", relax)
    app.connect("build-finished", restore)
