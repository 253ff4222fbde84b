"""The stylesheet pruner (docs/_ext/effpt_site/cssprune.py) keeps what pages name, drops the
rest and fails loudly on CSS it cannot parse.
"""

from __future__ import annotations

import re

import pytest

from effpt_site import cssprune

# -- cssprune ------------------------------------------------------------------------------


def _squash(css: str) -> str:
    return re.sub(r"\s+", "", re.sub(r"/\*(?!!).*?\*/", "", css, flags=re.DOTALL))


THEME_LIKE = """@charset "UTF-8";
/*! Bootstrap licence */
:root,[data-bs-theme=light]{--bs-blue:#0d6efd;--x:"{not a block}"}
html[data-theme=dark] .btn:hover,.unused-thing{color:red}
.fa-magnifying-glass,.fa-search{--fa:"\\f002"}
.fa-unused-icon{--fa:"\\f003"}
@media (min-width:960px){.navbar{display:flex}.modal-unused{display:none}}
@supports (display:grid){@media print{.d-print-none{display:none!important}}}
@font-face{font-family:Font Awesome\\ 7 Free;src:url(../vendor/fa-solid-900.woff2)}
@keyframes spin{0%{transform:rotate(0)}to{transform:rotate(1turn)}}
a[href$=".pdf"]::after{content:"}"}
.search-button-field>:not(svg,i){display:none}
"""


def test_parse_and_serialize_round_trip():
    assert _squash(cssprune.serialize(cssprune.parse(THEME_LIKE))) == _squash(THEME_LIKE)


def test_braces_in_strings_and_escapes_do_not_split_rules():
    rules = cssprune.parse(THEME_LIKE)
    preludes = [r.prelude for r in rules]
    assert 'a[href$=".pdf"]::after' in preludes
    assert rules[preludes.index('a[href$=".pdf"]::after')].body == 'content:"}"'


def test_prune_keeps_what_pages_name_and_drops_the_rest():
    present = cssprune.words(['<a class="btn navbar fa-magnifying-glass d-print-none">'])
    out = cssprune.prune(THEME_LIKE, present)
    assert "html[data-theme=dark] .btn:hover{color:red}" in out
    assert ".unused-thing" not in out
    assert "fa-unused-icon" not in out
    assert '.fa-magnifying-glass{--fa:"\\f002"}' in out  # the alias .fa-search is gone
    assert "@media (min-width:960px){.navbar{display:flex}}" in out
    assert "modal-unused" not in out
    assert "@supports (display:grid){@media print{.d-print-none" in out
    assert "@font-face" in out
    assert "@keyframes spin" in out
    assert "/*! Bootstrap licence */" in out
    # Names inside :not() never remove a selector.
    assert ".search-button-field>:not(svg,i)" not in out  # search-button-field absent
    kept = cssprune.prune(THEME_LIKE, present | {"search-button-field"})
    assert ".search-button-field>:not(svg,i){display:none}" in kept


def test_an_empty_grouping_rule_is_dropped():
    assert cssprune.prune("@media print{.gone{x:1}}.kept{y:2}", {"kept"}) == ".kept{y:2}"


def test_escaped_class_names_are_unescaped():
    assert cssprune.names_required(r".\31 0x") == {"10x"}
    assert cssprune.names_required(r".md\:flex") == {"md:flex"}
    # A name no word can spell is kept rather than guessed at.
    assert cssprune.prune(r".md\:flex{a:b}", set()) == r".md\:flex{a:b}"


@pytest.mark.parametrize("broken", [".a{color:red", "@media x{.a{b:c}", "/* open"])
def test_unbalanced_css_fails_loudly(broken):
    with pytest.raises(ValueError, match=r"unbalanced|unterminated"):
        cssprune.parse(broken)
