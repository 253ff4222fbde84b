"""Static checks of every gallery page's source: what readers download, what the asserts hold.

sphinx-gallery (0.22) writes each page's notebook from the page's code blocks with the
``# sphinx_gallery_start_ignore`` … ``# sphinx_gallery_end_ignore`` blocks removed
(``py_source_parser.remove_ignore_blocks``), and the ``.py`` download is a copy of the
source. So the visible code alone (what the notebook holds, and what a reader who
copies the shown cells runs) must define every name it uses: a function defined only
in a hidden block raises ``NameError`` in the downloaded notebook.

And no hidden assert may depend on a timing: a speed ratio, a bandwidth, a median is
an expectation (``effpt.expect.expect``), which reports its verdict and never fails a
build; only facts are asserted.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
import textwrap

import pytest
from page_runner import SCRIPTS, page_id

# The pattern sphinx-gallery removes (sphinx_gallery.py_source_parser.IGNORE_BLOCK_PATTERN).
_FLAG_START = r"^[\ \t]*#\s*"
IGNORE_BLOCK = re.compile(
    rf"{_FLAG_START}sphinx_gallery_start_ignore(?:[\s\S]*?){_FLAG_START}sphinx_gallery_end_ignore\n?",
    re.MULTILINE,
)
HIDDEN_BLOCK = re.compile(
    rf"{_FLAG_START}sphinx_gallery_start_ignore[^\n]*\n([\s\S]*?){_FLAG_START}sphinx_gallery_end_ignore",
    re.MULTILINE,
)
KNOWN = set(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__"}


def visible(source: str) -> str:
    """The page as readers get it in the notebook: hidden blocks removed."""
    return IGNORE_BLOCK.sub("", source)


def _tables(table: symtable.SymbolTable):
    yield table
    for child in table.get_children():
        yield from _tables(child)


def undefined_names(source: str) -> set[str]:
    """Names the code reads from module scope that nothing in it binds (pyflakes' F821)."""
    top = symtable.symtable(source, "page", "exec")
    defined = {
        s.get_name()
        for s in top.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    for table in _tables(top):
        defined |= {
            s.get_name() for s in table.get_symbols() if s.is_declared_global() and s.is_assigned()
        }
    used = set()
    for table in _tables(top):
        for s in table.get_symbols():
            at_module = table.get_type() == "module" or s.is_global()
            if s.is_referenced() and at_module:
                used.add(s.get_name())
    return used - defined - KNOWN


def unused_locals(source: str) -> set[tuple[str, str]]:
    """(function, name) of locals a function assigns and never reads (pyflakes' F841)."""
    out = set()
    for table in _tables(symtable.symtable(source, "page", "exec")):
        if table.get_type() != "function":
            continue
        for s in table.get_symbols():
            if (
                s.is_local()
                and s.is_assigned()
                and not s.is_referenced()
                and not s.is_parameter()
                and not s.is_namespace()
                and s.get_name() != "_"
            ):
                out.add((table.get_name(), s.get_name()))
    return out


def first_line(source: str, name: str) -> int:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id == name:
            return node.lineno
    return 0


@pytest.mark.parametrize("script", SCRIPTS, ids=page_id)
def test_visible_code_defines_every_name_it_uses(script):
    source = script.read_text(encoding="utf-8")
    shown = visible(source)
    ast.parse(shown)  # the notebook's code must still be valid Python
    missing = undefined_names(shown)
    lines = "; ".join(
        f"{name!r} (first used on line {first_line(shown, name)} of the visible code)"
        for name in sorted(missing)
    )
    assert not missing, (
        f"{page_id(script)}: the downloaded notebook raises NameError: {lines} "
        "is defined only inside a hidden block (or nowhere); define it in visible code"
    )
    # A local that only hidden code read is dead code in the notebook.
    dead = unused_locals(shown) - unused_locals(source)
    assert not dead, (
        f"{page_id(script)}: in the visible code these locals are assigned and never used "
        f"(only hidden code read them): {sorted(dead)}"
    )


#: Names (variables, functions, attributes) that make a value a timing, or a rate or
#: ratio derived from one: effpt.bench's and effpt.records' API, the clocks, the rates.
TIMING = re.compile(
    r"^(median\w*|\w*speedups?|Timing|time_callable|compare|perf_counter\w*|records"
    r"|\w*bandwidth\w*|\w*throughput\w*|gbps|per_call|q1|q3|timeit|Timer|monotonic\w*"
    r"|elapsed\w*|\w*_seconds|seconds|self_cpu_time_total|cpu_time_total|device_time\w*)$"
)


def _identifiers(node: ast.AST) -> set[str]:
    """Every name and attribute the code of ``node`` mentions (not strings, not comments)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
    return found


def _bound_names(target: ast.AST) -> set[str]:
    """Base names a target binds or changes: ``a`` of ``a``, ``a[i]``, ``a.b``, ``(a, b)``."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_bound_names(e) for e in target.elts))
    return set()


def timing_words(node: ast.AST, tainted: set[str]) -> set[str]:
    """The timing names ``node`` mentions, directly or through a tainted name."""
    return {i for i in _identifiers(node) if TIMING.match(i) or i in tainted}


def _without_facts(node: ast.AST) -> ast.AST:
    """``node`` without the parts that hold on every machine: ``len(...)`` (a count of
    measurements) and ``x > 0`` (a timing is positive)."""

    class Drop(ast.NodeTransformer):
        def visit_Call(self, call: ast.Call) -> ast.AST:
            if isinstance(call.func, ast.Name) and call.func.id == "len":
                return ast.Constant(0)
            call = self.generic_visit(call)
            # all(x > 0 for x in timings): every element became a fact
            if (
                isinstance(call.func, ast.Name)
                and call.func.id in {"all", "any"}
                and call.args
                and isinstance(call.args[0], ast.GeneratorExp)
                and isinstance(call.args[0].elt, ast.Constant)
            ):
                return ast.Constant(True)
            return call

        def visit_Compare(self, compare: ast.Compare) -> ast.AST:
            last = compare.comparators[-1]
            if (
                len(compare.ops) == 1
                and isinstance(compare.ops[0], ast.Gt)
                and isinstance(last, ast.Constant)
                and last.value == 0
            ):
                return ast.Constant(True)
            return self.generic_visit(compare)

    return Drop().visit(node)


def timing_names(tree: ast.Module, hops: int = 2) -> set[str]:
    """Names whose value comes from a timing, followed ``hops`` assignments deep.

    ``records = compare(...)``, then ``ratio = speedup(records[0], records[1])``, then
    ``by_width[w] = ratio``: all are timings. A function is one when what it returns
    names a timing directly; ``lst.append(timing)`` makes ``lst`` one. Names are not
    scoped (a page reuses ``data`` or ``r`` in many places), so the chase stops after
    ``hops`` steps rather than letting one reused name taint the whole page.
    """
    tainted: set[str] = set()
    for hop in range(hops):
        found = set()
        for node in ast.walk(tree):
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(node, ast.Assign):
                pairs = [(t, node.value) for t in node.targets]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                pairs = [(node.target, node.value)]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and hop == 0:
                returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value]
                if any(timing_words(r, set()) for r in returns):
                    found.add(node.name)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                args = [*node.args, *(k.value for k in node.keywords)]
                if (
                    isinstance(owner, ast.Name)
                    and node.func.attr in {"append", "extend", "update", "add", "insert"}
                    and any(timing_words(a, tainted) for a in args)
                ):
                    found.add(owner.id)
            for target, value in pairs:
                if timing_words(value, tainted):
                    found |= _bound_names(target)
        # "_" is a throwaway: a cell's `_ = expect(...)` says nothing of a later `for _ in`.
        tainted |= found - {"_"}
    return tainted


def hidden_asserts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every assert inside a hidden block."""
    found = []
    for match in HIDDEN_BLOCK.finditer(source):
        start_line = source.count("\n", 0, match.start(1)) + 1
        block = textwrap.dedent(match.group(1))
        try:
            tree = ast.parse(block)
        except SyntaxError:  # a block cut from an indented suite: fall back to lines
            for i, line in enumerate(block.splitlines()):
                if line.lstrip().startswith("assert"):
                    found.append((start_line + i, line.strip()))
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                text = ast.get_source_segment(block, node) or ""
                found.append((start_line + node.lineno - 1, text))
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=page_id)
def test_no_hidden_assert_depends_on_a_timing(script):
    source = script.read_text(encoding="utf-8")
    tainted = timing_names(ast.parse(source))
    bad = []
    for line, text in hidden_asserts(source):
        try:
            words = timing_words(_without_facts(ast.parse(textwrap.dedent(text))), tainted)
        except SyntaxError:
            words = {w for w in re.findall(r"\w+", text) if TIMING.match(w) or w in tainted}
        if words or "GB/s" in text:
            bad.append(f"line {line}: {text!r} (a timing through {sorted(words)})")
    assert not bad, (
        f"{page_id(script)}: hidden asserts that depend on a timing (make each an "
        "expectation with effpt.expect.expect, which reports and never fails):\n  "
        + "\n  ".join(bad)
    )


def test_the_checks_catch_what_they_are_for():
    page = textwrap.dedent(
        """
        # sphinx_gallery_start_ignore
        def peak_bytes(f):
            return 1
        # sphinx_gallery_end_ignore
        print(peak_bytes(len))

        def f():
            ratio = speedup(a, b)
            unused = 3
            # sphinx_gallery_start_ignore
            assert unused == 3
            # sphinx_gallery_end_ignore
            return speedup(a, b) if ratio else None

        by_width = {}
        for w in (1, 2):
            by_width[w] = compare(w)
        fast = by_width[2] / by_width[1]
        # sphinx_gallery_start_ignore
        assert fast > 1.5
        assert len(by_width) == 2 and all(t > 0 for t in by_width.values())
        assert x.shape == (3,)
        # sphinx_gallery_end_ignore
        """
    )
    assert undefined_names(visible(page)) == {"peak_bytes", "speedup", "a", "b", "compare"}
    assert unused_locals(visible(page)) - unused_locals(page) == {("f", "unused")}
    tainted = timing_names(ast.parse(page))
    assert {"by_width", "fast", "f"} <= tainted
    assert not {"x", "w"} & tainted
    texts = [t for _, t in hidden_asserts(page)]
    assert texts == [
        "assert unused == 3",
        "assert fast > 1.5",
        "assert len(by_width) == 2 and all(t > 0 for t in by_width.values())",
        "assert x.shape == (3,)",
    ]
    flagged = [
        t for t in texts if timing_words(_without_facts(ast.parse(t)), tainted) and "fast" in t
    ]
    assert flagged == ["assert fast > 1.5"]
    assert not timing_words(_without_facts(ast.parse(texts[2])), tainted)


BOX = re.compile(r"^\.\. effpt-before-you-start::\n((?:   .*\n)+)", re.MULTILINE)


@pytest.mark.parametrize("script", SCRIPTS, ids=page_id)
def test_every_page_says_before_you_start_what_it_teaches_and_needs(script):
    """Issue 25: each page states its box in its own docstring, right under the title."""
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    match = BOX.search(docstring + "\n")
    assert match, f"{script.name}: no '.. effpt-before-you-start::' box in the docstring"
    lines = docstring.splitlines()
    assert lines[1].startswith("==="), f"{script.name}: the title is not on the first line"
    assert lines[3].startswith(".. effpt-before-you-start::"), (
        f"{script.name}: the box is not directly under the title"
    )
    options = set(re.findall(r"^   :([\w-]+):", match.group(1), re.MULTILINE))
    assert options == {"learn", "read-first", "needs"}, (script.name, options)
    learn = re.search(r":learn:(.*?)(?=^   :)", match.group(1), re.MULTILINE | re.DOTALL)
    points = re.findall(r"^\s*- ", learn.group(1), re.MULTILINE) if learn else []
    assert 2 <= len(points) <= 4, f"{script.name}: {len(points)} learning points, not 2 to 4"
