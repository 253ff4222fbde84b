"""docs/_ext/effpt_site/message_parsing.py: the translation transform's work nobody reads, skipped.

Sphinx's :func:`sphinx.util.nodes.is_translatable` renders a skipped node as DOM XML for a
debug message at every call; a cold Chinese build made ~28,000 of them (a twentieth of its
time) and showed none.
"""

from __future__ import annotations

import contextlib
import logging
import pickle

import pytest
from docutils import nodes
from sphinx.util import nodes as sphinx_nodes

from effpt_site import message_parsing


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(sphinx_nodes, "repr_domxml", sphinx_nodes.repr_domxml)
    message_parsing.install_lazy_node_xml()
    return sphinx_nodes.repr_domxml


def skipped_node():
    # A paragraph with no source: Sphinx's own text, skipped with a debug message.
    return nodes.paragraph("", "", nodes.Text("built in " * 20))


@pytest.mark.usefixtures("installed")
def test_a_skipped_node_is_not_rendered_when_its_debug_message_is_not_shown(monkeypatch):
    rendered = []
    real = nodes.Node.asdom
    monkeypatch.setattr(
        nodes.Node, "asdom", lambda self, *a: rendered.append(self) or real(self, *a)
    )
    assert not sphinx_nodes.is_translatable(skipped_node())
    assert rendered == []


def test_the_debug_message_is_the_same_text_when_shown(installed, caplog):
    node = skipped_node()
    expected = message_parsing.EAGER_REPR_DOMXML(node)
    lazy = installed(node)
    assert str(lazy) == expected
    assert f"{lazy}" == expected
    assert "%s" % lazy == expected  # noqa: UP031  (how logging formats it)
    assert installed(node, 0) == message_parsing.EAGER_REPR_DOMXML(node, 0)
    # A record sent from a parallel reader to the main process carries the text.
    assert pickle.loads(pickle.dumps(lazy)) == expected
    with caplog.at_level(logging.DEBUG, logger="sphinx.sphinx.util.nodes"):
        logging.getLogger("sphinx.sphinx.util.nodes").debug("[i18n] SKIP: %s", lazy)
    assert expected in caplog.text


def test_installing_twice_wraps_once(installed):
    message_parsing.install_lazy_node_xml()
    assert sphinx_nodes.repr_domxml is installed


SAMPLES = [
    "A paragraph with ``code``, *emphasis* and a `link <https://example.org>`_.",
    "Title\n=====\n\nText.\n\nSub\n---\n\n- one\n- two\n\n  - nested *x*\n\n#. auto\n#. again\n",
    "3. three\n4. four\n\nterm\n   definition\n\n:field: value\n\n| line\n| block\n",
    ".. note::\n\n   Inside a directive:\n\n   1. a\n   2. b\n\n.. _target:\n\nText_ and target_.\n",
    "Broken ``literal and *emphasis\n\n   Unexpected indent.\n",
    "+---+---+\n| a | b |\n+---+---+\n\n.. [1] A footnote [1]_.\n\nTitle\n=====\n",
]


def parse(text: str):
    from docutils.core import publish_doctree

    settings = {"report_level": 5, "halt_level": 5, "warning_stream": False}
    return publish_doctree(text, settings_overrides=settings).pformat()


@pytest.fixture
def pooled(monkeypatch):
    from docutils.parsers.rst import states

    monkeypatch.setattr(message_parsing, "_POOL", {})
    with pool_installed():
        yield states.RSTStateMachine


@contextlib.contextmanager
def pool_installed():
    """The pool installed for a test, then docutils' own behaviour back for the next ones.

    ``__new__`` is never deleted again: CPython's type slots do not return to
    ``object.__new__`` after ``del cls.__new__``, and every later construction with
    arguments fails ("object.__new__() takes exactly one argument"). The pooled ``__new__``
    stays; with docutils' own ``__init__`` and ``run`` back, no machine enters the pool,
    so it makes a new one each time, as docutils does.
    """
    from docutils.parsers.rst import states

    machine = states.RSTStateMachine
    saved = {name: machine.__dict__.get(name) for name in ("__init__", "run")}
    message_parsing.install_state_machine_pool()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:  # inherited: deleting brings it back (unlike __new__)
                delattr(machine, name)
            else:
                setattr(machine, name, value)


def test_docutils_makes_state_machines_with_arguments_after_a_pooled_test():
    from docutils.parsers.rst import states

    with pool_installed():
        parse(SAMPLES[0])
    message_parsing._POOL.clear()
    machine = states.RSTStateMachine(state_classes=states.state_classes, initial_state="Body")
    assert machine.initial_state == "Body"
    assert parse(SAMPLES[0])


def test_a_parser_takes_a_state_machine_that_a_finished_parse_left(pooled, monkeypatch):
    made = []
    real = message_parsing.REAL_INIT
    monkeypatch.setattr(
        message_parsing,
        "REAL_INIT",
        lambda self, *a, **k: made.append(type(self)) or real(self, *a, **k),
    )
    for text in SAMPLES:
        parse(text)
    assert made.count(pooled) == 1
    # docutils still makes its nested machines as it did (those its states cache are
    # kept with the machine): a second round makes no more of them than the first.
    first = len(made)
    for text in SAMPLES:
        parse(text)
    assert made.count(pooled) == 1
    assert len(made) - first <= first - 1


@pytest.mark.usefixtures("pooled")
def test_a_reused_state_machine_parses_as_a_new_one(monkeypatch):
    reused = [parse(text) for text in SAMPLES * 2]
    monkeypatch.setattr(message_parsing, "_POOL", {})
    for text, tree in zip(SAMPLES * 2, reused, strict=True):
        message_parsing._POOL.clear()
        assert parse(text) == tree


@pytest.mark.usefixtures("pooled")
def test_a_parse_inside_a_parse_gets_its_own_state_machine():
    # A directive that parses a document of its own while the outer parse runs.
    from docutils.parsers.rst import Directive, directives

    inner = []

    class Inner(Directive):
        has_content = True

        def run(self):
            inner.append(parse("\n".join(self.content)))
            return []

    directives.register_directive("effpt-inner", Inner)
    text = "Before.\n\n.. effpt-inner::\n\n   - item *x*\n\nAfter *y*.\n"
    try:
        first, again = parse(text), parse(text)
    finally:
        directives._directives.pop("effpt-inner", None)
    assert first == again
    assert "After" in first
    assert inner[0] == inner[1]
    assert "<bullet_list" in inner[0]
