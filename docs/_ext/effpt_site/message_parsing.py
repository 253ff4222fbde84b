"""The work Sphinx's translation transform repeats for every message, done once or when needed.

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

The transform parses each translated message as a document of its own (~3,800 of them,
and the catalogue check parses as many again): each parse makes a new
:class:`docutils.parsers.rst.states.RSTStateMachine`, whose fifteen states each compile
their transition tables, several times the cost of parsing a one-line message. Docutils
already reuses its nested state machines from one nested parse to the next (each state's
``nested_sm_cache``); here a top-level state machine whose parse has finished is kept the
same way (:func:`install_state_machine_pool`), and the next parser that asks for one with
the same state classes takes it: ``run`` sets up everything a parse reads (the document,
its memo, the input, the current state) and ends by dropping its observers. A machine
still running (a directive parsing a document of its own) is never handed out, and one
whose parse raised is dropped. Subclasses (docutils' nested machines) are left alone.
"""

from __future__ import annotations

from docutils.parsers.rst import states
from sphinx.util import nodes as sphinx_nodes

#: Sphinx's own function, which renders at once.
EAGER_REPR_DOMXML = getattr(sphinx_nodes.repr_domxml, "effpt_wraps", sphinx_nodes.repr_domxml)


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


# -- top-level state machines, reused -------------------------------------------------------

#: Finished top-level state machines, by (state classes, initial state, debug).
_POOL: dict[tuple, list] = {}

_MACHINE = states.RSTStateMachine
#: docutils' own constructor and ``run``.
REAL_INIT = getattr(_MACHINE.__init__, "effpt_wraps", _MACHINE.__init__)
REAL_RUN = getattr(_MACHINE.run, "effpt_wraps", _MACHINE.run)


def _pool_key(state_classes, initial_state, debug=False) -> tuple:
    return (tuple(state_classes), initial_state, bool(debug))


def _pooled_new(cls, *args, **kwargs):
    if cls is _MACHINE:
        try:
            machines = _POOL.get(_pool_key(*args, **kwargs))
        except TypeError:
            machines = None  # arguments docutils' constructor would refuse: let it say so
        if machines:
            machine = machines.pop()
            machine._effpt_taken = True  # made already: __init__ keeps it as it is
            return machine
    return object.__new__(cls)


def _pooled_init(self, *args, **kwargs) -> None:
    if self.__dict__.pop("_effpt_taken", False):
        return
    REAL_INIT(self, *args, **kwargs)
    if type(self) is _MACHINE:
        self._effpt_key = _pool_key(*args, **kwargs)


def _pooled_run(self, *args, **kwargs) -> None:
    REAL_RUN(self, *args, **kwargs)  # a parse that raised does not come back
    key = self.__dict__.get("_effpt_key")
    if key is not None:
        _POOL.setdefault(key, []).append(self)


_pooled_init.effpt_wraps = REAL_INIT
_pooled_run.effpt_wraps = REAL_RUN


def install_state_machine_pool(*_args) -> None:
    """Keep finished top-level state machines for the next parse (once)."""
    if getattr(_MACHINE.run, "effpt_wraps", None) is not None:
        return
    _MACHINE.__new__ = _pooled_new
    _MACHINE.__init__ = _pooled_init
    _MACHINE.run = _pooled_run


def setup(app) -> None:
    app.connect("config-inited", install_lazy_node_xml)
    app.connect("config-inited", install_state_machine_pool)
