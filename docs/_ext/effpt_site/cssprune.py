r"""Drop the style rules no page of the site can use, as PurgeCSS does.

A stylesheet is split into rules; a selector survives when every class and id it names
occurs as a word somewhere in the site's HTML or scripts (so classes that scripts add
at run time, such as ``show`` or ``dropdown-menu-dark``, survive too). Rules whose
selectors all fail are dropped; at-rules that hold rules (``@media``, ``@supports``,
``@layer``, ``@container``) are pruned inside and dropped when empty; every other
at-rule (``@font-face``, ``@keyframes``, ``@import``) is kept as it is. Tag names,
attribute selectors and whatever sits inside a functional pseudo-class
(``:not(.x)``, ``:is(.a, .b)``) never remove a selector: pruning only ever keeps too
much, never too little.

The parser knows only what pruning needs: strings, comments, escapes and nested
blocks. It round-trips a stylesheet without comments exactly.

Examples
--------
>>> css = ".a{color:red}.b,.c>p{margin:0}@media (min-width:9px){.b{x:1}.a{y:2}}"
>>> prune(css, {"a", "c"})
'.a{color:red}.c>p{margin:0}@media (min-width:9px){.a{y:2}}'
>>> serialize(parse(css)) == css
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: At-rules whose block holds rules (pruned inside) rather than declarations.
GROUPING = {"media", "supports", "layer", "container", "document", "-moz-document", "scope"}

#: What PurgeCSS's default extractor calls a word.
WORD = re.compile(r"[A-Za-z0-9_-]+")


@dataclass
class Rule:
    """One rule: its prelude (selectors or at-rule head) and its block.

    ``body`` is the text between the braces for a style rule or a non-grouping at-rule,
    a list of rules for a grouping at-rule, and ``None`` for a statement that ends in a
    semicolon (``@import ...;``). A kept comment (``/*! licence */``) is a rule whose
    prelude is the comment and whose body is ``None``.
    """

    prelude: str
    body: str | list[Rule] | None = None

    @property
    def at_name(self) -> str:
        """The at-rule's name in lower case, or ``""`` for a style rule."""
        match = re.match(r"\s*@([\w-]+)", self.prelude)
        return match.group(1).lower() if match else ""


def _skip_string(css: str, i: int) -> int:
    quote, i = css[i], i + 1
    while i < len(css) and css[i] != quote:
        i += 2 if css[i] == "\\" else 1
    return i + 1


def _skip_comment(css: str, i: int) -> int:
    end = css.find("*/", i + 2)
    if end < 0:
        msg = f"unterminated comment at offset {i}"
        raise ValueError(msg)
    return end + 2


def _block_end(css: str, i: int) -> int:
    """Offset of the brace closing the block that starts after ``css[i - 1] == '{'``."""
    depth = 1
    while i < len(css):
        char = css[i]
        if char in "\"'":
            i = _skip_string(css, i)
            continue
        if css.startswith("/*", i):
            i = _skip_comment(css, i)
            continue
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    msg = "unbalanced braces: a block is never closed"
    raise ValueError(msg)


def parse(css: str) -> list[Rule]:
    """Split a stylesheet into rules (comments dropped, ``/*!`` comments kept)."""
    rules, _ = _parse(css, 0, nested=False)
    return rules


def _parse(css: str, i: int, *, nested: bool) -> tuple[list[Rule], int]:
    rules: list[Rule] = []
    prelude: list[str] = []
    start = i
    while i < len(css):
        char = css[i]
        if char in "\"'":
            i = _skip_string(css, i)
        elif css.startswith("/*", i):
            prelude.append(css[start:i])
            end = _skip_comment(css, i)
            if css.startswith("/*!", i) and not "".join(prelude).strip():
                rules.append(Rule(css[i:end]))
            i = start = end
        elif char == "\\":
            i += 2
        elif char == "{":
            head = ("".join(prelude) + css[start:i]).strip()
            rule = Rule(head)
            if rule.at_name in GROUPING:
                rule.body, i = _parse(css, i + 1, nested=True)
            else:
                end = _block_end(css, i + 1)
                rule.body, i = css[i + 1 : end], end
            rules.append(rule)
            prelude, i = [], i + 1
            start = i
        elif char == ";":
            head = ("".join(prelude) + css[start:i]).strip()
            if head.startswith("@"):
                rules.append(Rule(head))
                prelude, start = [], i + 1
            i += 1
        elif char == "}" and nested:
            return rules, i
        else:
            i += 1
    if nested:
        msg = "unbalanced braces: a grouping rule is never closed"
        raise ValueError(msg)
    return rules, i


def serialize(rules: Iterable[Rule]) -> str:
    """Write rules back as CSS."""
    out = []
    for rule in rules:
        if rule.body is None:
            out.append(rule.prelude if rule.prelude.startswith("/*") else rule.prelude + ";")
        elif isinstance(rule.body, list):
            out.append(f"{rule.prelude}{{{serialize(rule.body)}}}")
        else:
            out.append(f"{rule.prelude}{{{rule.body}}}")
    return "".join(out)


def _outside_strings(text: str) -> Iterator[tuple[int, str, int]]:
    r"""Walk ``text`` past its strings: ``(index, piece, depth)`` for each other character
    and each escape (a backslash and the character after it, one piece).

    ``depth`` counts the parentheses and brackets open around the piece (a bracket
    itself stands outside the pair it opens or closes).

    >>> [(p, d) for _, p, d in _outside_strings('a("x")')]
    [('a', 0), ('(', 0), (')', 0)]
    >>> [(p, d) for _, p, d in _outside_strings(r"[\,]")]
    [('[', 0), ('\\,', 1), (']', 0)]
    """
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char in "\"'":
            i = _skip_string(text, i)
            continue
        piece = text[i : i + 2] if char == "\\" else char
        if char in ")]":
            depth = max(depth - 1, 0)
        yield i, piece, depth
        if char in "([":
            depth += 1
        i += len(piece)


def split_top_level(text: str, separator: str) -> list[str]:
    """Split ``text`` on each ``separator`` outside strings, brackets and parentheses.

    >>> split_top_level('a;b:url("x;y");c:f(1;2)', ";")
    ['a', 'b:url("x;y")', 'c:f(1;2)']
    """
    parts, start = [], 0
    for i, piece, depth in _outside_strings(text):
        if piece == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def split_selectors(prelude: str) -> list[str]:
    """Split a selector list on its top-level commas.

    >>> split_selectors('a, :is(.b, .c) d, [title="x,y"]')
    ['a', ':is(.b, .c) d', '[title="x,y"]']
    """
    return [p.strip() for p in split_top_level(prelude, ",") if p.strip()]


_NAME = re.compile(r"[.#]((?:[\w-]|\\[0-9a-fA-F]{1,6} ?|\\.|[^\x00-\x7f])+)")
_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6}) ?|\\(.)")


def _unescape(name: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else m.group(2), name)


def names_required(selector: str) -> set[str]:
    """The class and id names a selector needs on the page (outside brackets and parens).

    >>> sorted(names_required('html[data-theme=dark] .nav>li.active:not(.x)#main::before'))
    ['active', 'main', 'nav']
    >>> names_required('a[href$=".pdf"]')
    set()
    """
    brackets = ("(", ")", "[", "]")
    flat = [p for _, p, depth in _outside_strings(selector) if depth == 0 and p not in brackets]
    return {_unescape(m.group(1)) for m in _NAME.finditer("".join(flat))}


def words(texts: Iterable[str]) -> set[str]:
    """Every word (as PurgeCSS's default extractor splits them) in the given texts."""
    found: set[str] = set()
    for text in texts:
        found.update(WORD.findall(text))
    return found


def _keep(selector: str, present: set[str]) -> bool:
    # A name with characters a word never has (``md:flex``) cannot be looked up: keep it.
    return all(name in present or not WORD.fullmatch(name) for name in names_required(selector))


def prune_rules(rules: list[Rule], present: set[str]) -> list[Rule]:
    """The rules that can match some page, given the words ``present`` in the site."""
    kept = []
    for rule in rules:
        if isinstance(rule.body, list):
            inner = prune_rules(rule.body, present)
            if inner:
                kept.append(Rule(rule.prelude, inner))
        elif rule.body is not None and not rule.at_name:
            selectors = [s for s in split_selectors(rule.prelude) if _keep(s, present)]
            if selectors:
                kept.append(Rule(",".join(selectors), rule.body))
        else:
            kept.append(rule)
    return kept


def prune(css: str, present: set[str]) -> str:
    """Stylesheet text without the rules no page can match."""
    return serialize(prune_rules(parse(css), present))
