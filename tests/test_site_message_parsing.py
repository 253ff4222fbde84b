"""docs/_ext/effpt_site/message_parsing.py: the translation transform's work nobody reads, skipped.

Sphinx's :func:`sphinx.util.nodes.is_translatable` renders a skipped node as DOM XML for a
debug message at every call; a cold Chinese build made ~28,000 of them (a twentieth of its
time) and showed none.
"""

from __future__ import annotations

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


def test_a_skipped_node_is_not_rendered_when_its_debug_message_is_not_shown(
    installed, monkeypatch
):
    rendered = []
    real = nodes.Node.asdom
    monkeypatch.setattr(nodes.Node, "asdom", lambda self, *a: rendered.append(self) or real(self, *a))
    assert not sphinx_nodes.is_translatable(skipped_node())
    assert rendered == []


def test_the_debug_message_is_the_same_text_when_shown(installed, caplog):
    node = skipped_node()
    expected = message_parsing.EAGER_REPR_DOMXML(node)
    lazy = installed(node)
    assert str(lazy) == expected
    assert f"{lazy}" == expected and "%s" % lazy == expected
    assert installed(node, 0) == message_parsing.EAGER_REPR_DOMXML(node, 0)
    # A record sent from a parallel reader to the main process carries the text.
    assert pickle.loads(pickle.dumps(lazy)) == expected
    with caplog.at_level(logging.DEBUG, logger="sphinx.sphinx.util.nodes"):
        logging.getLogger("sphinx.sphinx.util.nodes").debug("[i18n] SKIP: %s", lazy)
    assert expected in caplog.text


def test_installing_twice_wraps_once(installed):
    message_parsing.install_lazy_node_xml()
    assert sphinx_nodes.repr_domxml is installed
