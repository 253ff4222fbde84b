"""The translation transform's work that nobody reads, held back until it is read.

Sphinx's translated build (the Chinese edition) asks
:func:`sphinx.util.nodes.is_translatable` of every node of every page. For each node it
skips it also renders the node as DOM XML (docutils' ``asdom().toxml()``, through
:func:`sphinx.util.nodes.repr_domxml`) as the argument of a debug message, which Sphinx
shows only at ``-vv``: a cold Chinese build rendered ~28,000 nodes, about a twentieth of
its time, and printed none of them.

Here :func:`sphinx.util.nodes.repr_domxml` returns a :class:`LazyNodeXml`, whose text is
the same string, made when the message is formatted (shown, or sent from a parallel
reader to the main process): the messages are unchanged, and a build that shows none
renders no node. Every caller of ``repr_domxml`` in Sphinx 9 passes it to a debug
message.
"""

from __future__ import annotations

from sphinx.util import nodes as sphinx_nodes

#: Sphinx's own function, which renders at once.
EAGER_REPR_DOMXML = getattr(
    sphinx_nodes.repr_domxml, "effpt_wraps", sphinx_nodes.repr_domxml
)


class LazyNodeXml:
    """``repr_domxml(node, length)``'s text, rendered the first time it is asked for."""

    __slots__ = ("_args", "_text")

    def __init__(self, node, length: int) -> None:
        self._args = (node, length)
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = EAGER_REPR_DOMXML(*self._args)
            self._args = None
        return self._text

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return str(self) == other

    __hash__ = None

    def __reduce__(self):
        return (str, (str(self),))


def lazy_repr_domxml(node, length: int = 80) -> LazyNodeXml:
    """:func:`sphinx.util.nodes.repr_domxml`, rendered only when its message is formatted."""
    return LazyNodeXml(node, length)


lazy_repr_domxml.effpt_wraps = EAGER_REPR_DOMXML


def install_lazy_node_xml(*_args) -> None:
    """Make Sphinx's ``repr_domxml`` lazy (once; a second call changes nothing)."""
    if getattr(sphinx_nodes.repr_domxml, "effpt_wraps", None) is None:
        sphinx_nodes.repr_domxml = lazy_repr_domxml


def setup(app) -> None:
    app.connect("config-inited", install_lazy_node_xml)
