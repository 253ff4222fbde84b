"""The Chinese edition: this extension's own strings, the catalogues' checks and coverage.

The pages' text is translated the standard way: ``nox -s translations`` runs Sphinx's
gettext builder and ``sphinx-intl``, translators edit docs/locale/zh_CN/LC_MESSAGES/*.po,
and ``nox -s docs`` builds the Chinese site from the same executed pages (nothing runs
twice). This module adds what that pipeline lacks:

* the few strings this extension writes itself (the run stamp, the torch badge, table
  headers), in :data:`MESSAGES`; volatile text such as dates, machines and timings is
  rendered by directives whose nodes are never extracted as messages;
* a check of every catalogue before the build: a ``.po`` syntax error, or a translation
  whose reST markup (roles, inline literals, links) no longer matches its English,
  fails the build naming the file and line;
* coverage, counted on the pages as built: the share of messages the catalogues
  translated (a message whose English changed since, or whose translation is fuzzy,
  counts as untranslated), printed per language, failing the build below
  ``effpt_translation_threshold``;
* a note on every translated page that still shows English passages, linking to the
  English page;
* the API reference's docstrings stay English (they are effpt's own documentation).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Languages of the site, with the name a reader looks for in the switch.
LANGUAGES = {"en": "English", "zh_CN": "中文"}

#: This extension's own strings, by language. English is the key.
MESSAGES: dict[str, dict[str, str]] = {
    "zh_CN": {
        "Executed {when} on {machine} in {seconds} s.": "于 {when} 在 {machine} 上执行，用时 {seconds} 秒。",
        "Peak GPU memory allocated by torch: {mib} MiB.": "torch 分配的 GPU 显存峰值：{mib} MiB。",
        "Not executed in this build: {reason}": "本次构建未执行此页：{reason}",
        "Verified on torch {versions}": "已在 torch {versions} 上验证",
        "Verified on a CPU with torch {versions}": "已在 CPU 上用 torch {versions} 验证",
        "Verified on a GPU with torch {versions}": "已在 GPU 上用 torch {versions} 验证",
        " (": "（",
        ")": "）",
        "failed on {versions}": "在 {versions} 上失败",
        "Not verified on any torch": "尚未在任何 torch 版本上验证通过",
        "Not yet run by the torch matrix": "尚未经 torch 版本矩阵运行",
        "compatibility": "兼容性",
        " and ": " 和 ",
        ", ": "、",
        "; ": "；",
        "This translation is older than the English page: {count} of its {total} "
        "passages are shown in English until they are translated.": (
            "此译文比英文页面旧：全部 {total} 段中有 {count} 段在译好之前以英文显示。"
        ),
        "Read the English page": "阅读英文页面",
        # what a reader can do from a page (reader_links.py)
        "Report a problem with this page": "报告本页的问题",
        "What went wrong, and what did you expect?": "出了什么问题？你原本期望看到什么？",
        "Run in Google Colab": "在 Google Colab 中运行",
        "Related pages": "相关页面",
        # the "before you start" box (before_you_start.py)
        "Before you start": "开始之前",
        "What you will learn": "你将学到",
        "Read first": "先读",
        "What it needs": "所需环境",
        "Run time": "运行时间",
        "{seconds} s on the machine that built this site": "在构建本站的机器上用时 {seconds} 秒",
        # llms.txt (plain_text.py)
        "A documentation site whose every page is produced by running code: how to use "
        "PyTorch well, measured on the machine that built it. Each page below is the "
        "plain text of its HTML page, with the executed output.": (
            "一个每一页都由运行代码生成的文档站点：如何用好 PyTorch，并在构建它的机器上实测。"
            "下面每一项都是对应 HTML 页面的纯文本，含执行输出。"
        ),
        "Pages of this site": "本站页面",
        # the index of PyTorch names (related.py)
        "PyTorch functions and the pages that use them": "PyTorch 函数及使用它们的页面",
        "Every name from torch that a gallery page's code calls or refers to, in "
        "alphabetical order, with the pages that use it ({count} names).": (
            "示例库页面的代码调用或引用的每个 torch 名称，按字母顺序排列，并附上使用它的页面（共 {count} 个名称）。"
        ),
        ": ": "：",
        "Show or hide this section's pages": "展开或收起本节的页面",
        "Built on {day} on {where}, with {torch}.": "本站的这份副本于 {day} 在 {where} 上构建，使用 {torch}。",
        "Built on {day} on {where}.": "本站的这份副本于 {day} 在 {where} 上构建。",
        # the execution-times page
        "No example has been executed in this build tree.": "本构建目录中还没有执行过任何示例。",
        "The whole gallery ran in **{total} s**; the slowest page is {page} at **{seconds} s**.": (
            "整个示例库运行了 **{total} 秒**；最慢的一页是 {page}，用时 **{seconds} 秒**。"
        ),
        "This build ran on a CPU, where a page's own peak memory cannot be told apart from "
        "the memory of the whole build process, so none is shown.": (
            "本次构建在 CPU 上运行，无法把某一页自身的内存峰值与整个构建进程的内存区分开，因此不显示内存。"
        ),
        "Per family": "按系列",
        "Family": "系列",
        "Pages": "页数",
        "Total": "合计",
        "Per page, slowest first": "按页，最慢的在前",
        "Page": "页面",
        "Time": "用时",
        "Peak GPU memory": "GPU 显存峰值",
        # the compatibility page
        "The torch matrix has not been run for this copy.": "本站的这份副本还没有运行过 torch 版本矩阵。",
        "The matrix runs": "矩阵的各次运行",
        "Run on": "运行环境",
        "Date": "日期",
        "Pages that ran": "运行成功的页面",
        "Unit tests": "单元测试",
        "{ok} of {total}": "{total} 页中的 {ok} 页",
        "{passed} passed, {failed} failed": "{passed} 个通过，{failed} 个失败",
        ", {skipped} skipped": "，{skipped} 个跳过",
        "Each page on each torch (✓ ran, ✗ failed; warnings raised)": (
            "每一页在每个 torch 版本上的结果（✓ 运行成功，✗ 失败；括号内为发出的警告数）"
        ),
        "not run": "未运行",
        " (1 warning)": "（1 条警告）",
        " ({count} warnings)": "（{count} 条警告）",
        "torch {version}: failed": "torch {version}：失败",
        "Output changed from torch {old} to {new}": "从 torch {old} 到 {new}，输出有变化",
        "The printed output is the same on every version (timings masked).": (
            "各版本打印的输出都相同（计时已屏蔽）。"
        ),
        # the measurements page
        "The source material's speed claims, measured by this build": "原始资料中关于速度的说法，由本次构建实测",
        "Claim": "说法",
        "Source": "出处",
        "Source says": "原文数字",
        "This build": "本次构建",
        "Met?": "是否成立",
        "not measured": "未测量",
        "not measured: {variant} did not run on {machine}": "未测量：{variant} 未在 {machine} 上运行",
        "a GPU": "GPU",
        "a CPU": "CPU",
        "not comparable on this machine: the source measured on {source}, this build ran on "
        "{machine} ({where})": "在本机上不可比：原文在 {source} 上测量，本次构建运行于 {machine}（{where}）",
        "{ratio} on {machine} ({where})": "{ratio}，运行于 {machine}（{where}）",
        "yes": "成立",
        "nearly": "接近",
        "no": "不成立",
        "inconclusive": "无法判定",
        "holds here": "在此成立",
        "does not hold here": "在此不成立",
        "No page of this build stated an expectation.": "本次构建中没有页面提出预期。",
        "{total} expectations: {held} hold here, {failed} do not, {unsure} inconclusive.": (
            "共 {total} 项预期：{held} 项在此成立，{failed} 项不成立，{unsure} 项无法判定。"
        ),
        "What the pages expect of the machine, and this build’s verdict": "各页对机器的预期，及本次构建的判定",
        "Expectation": "预期",
        "Expected": "预期条件",
        "Measured": "测得",
        "Verdict": "判定",
        "faster": "更快",
        "slower": "更慢",
        "All timings below were taken on {machines}.": "以下所有计时均在 {machines} 上测得。",
        "Every timing in the gallery": "示例库中的全部计时",
        "Task": "任务",
        "Variant": "写法",
        "Median": "中位数",
        "IQR": "四分位距",
        "Repeats": "重复次数",
        "vs baseline": "相对基准",
        "baseline": "基准",
        "No page of this build recorded a measurement.": "本次构建中没有任何页面记录测量结果。",
        # the sources' claims (effpt_site.measurements.CLAIMS)
        "the Effective PyTorch guide": "《Effective PyTorch》指南",
        "Thomas Viehmann's ACDL 2020 notebook": "Thomas Viehmann 的 ACDL 2020 笔记本",
        "Iterating rows with unbind is about 30 % faster than indexing them (500 × 10)": (
            "用 unbind 遍历各行比逐行索引快约 30 %（500 × 10）"
        ),
        "One torch.sum is about 100× faster than a loop over the rows (500 × 10)": (
            "一次 torch.sum 比逐行循环快约 100 倍（500 × 10）"
        ),
        "The uniformity loss through a matrix product instead of pdist: 19.4 ms → 2.26 ms "
        "(1024 × 128, forward and backward)": (
            "用矩阵乘法代替 pdist 计算均匀性损失：19.4 ms → 2.26 ms（1024 × 128，前向加反向）"
        ),
        "A TorchScript loop is about 10 % faster than the Python loop (batch gather)": (
            "TorchScript 循环比 Python 循环快约 10 %（批量 gather）"
        ),
        "A vectorised batch gather is about 100× faster than the loop": "向量化的批量 gather 比循环快约 100 倍",
        "TorchScript's fuser takes the box IoU of 100 000 pairs from 238 µs to 40.3 µs": (
            "TorchScript 的融合器把 100 000 对框的 IoU 从 238 µs 降到 40.3 µs"
        ),
    }
}


def translate(language: str | None, text: str, **values: object) -> str:
    """``text`` in ``language`` (English when no translation is known), then formatted.

    Examples
    --------
    >>> translate("zh_CN", "Verified on torch {versions}", versions="2.13.0")
    '已在 torch 2.13.0 上验证'
    >>> translate("fr", "Verified on torch {versions}", versions="2.13.0")
    'Verified on torch 2.13.0'
    """
    table = MESSAGES.get(language or "en", {})
    return table.get(text, text).format(**values)


def language_of(app) -> str:
    """The language this build writes (``en`` when none is set)."""
    return app.config.language or "en"


def freeze(node: nodes.Node) -> nodes.Node:
    """Keep every text under ``node`` out of the translators' catalogues.

    For what a directive computes at build time (timings, dates, outcomes): such text
    would become a message that changes with every build. Its fixed words come from
    :func:`translate` instead.
    """
    for element in node.findall(nodes.TextElement):
        element["translatable"] = False
    return node


_LOOKUPS: dict[Path, dict[str, str]] = {}


def lookup(app, docname: str, message: str) -> str | None:
    """The translation of ``message`` in the catalogue of page ``docname``, if any.

    For text one page shows from another page's source (the landing page's family
    intros), so that it is translated once, in the page it belongs to.
    """
    language = language_of(app)
    if language == "en":
        return None
    path = Path(app.srcdir) / "locale" / language / "LC_MESSAGES" / f"{docname}.po"
    if path not in _LOOKUPS:
        table = {}
        if path.is_file():
            for entry in read_catalogue(path):
                if entry.id and entry.string and not entry.fuzzy:
                    table[" ".join(entry.id.split())] = entry.string
        _LOOKUPS[path] = table
    return _LOOKUPS[path].get(" ".join(message.split()))


# -- the catalogues ---------------------------------------------------------------------
@dataclass(frozen=True)
class Coverage:
    """Messages of a catalogue: translated (and not fuzzy), fuzzy, and all of them."""

    translated: int
    fuzzy: int
    total: int

    @property
    def share(self) -> float:
        """Translated and not fuzzy, as a fraction of all messages (1.0 for none)."""
        return self.translated / self.total if self.total else 1.0


#: Inline reST markup that a translation must carry over unchanged: roles with their
#: targets, inline literals and hyperlink targets.
_MARKUP = re.compile(r":[\w:+-]+:`[^`]+`|``[^`]+``|`[^`<]*<[^>]+>`_")


def _markup(text: str) -> list[str]:
    """The inline markup of ``text`` that must survive translation, sorted.

    A role's shown text may change (``:doc:`Broadcasting </x>``` to a Chinese title),
    so only its target counts.

    Examples
    --------
    >>> _markup("See :func:`torch.sum` and ``x += y``, or :doc:`this page </a/b>`.")
    [':doc:/a/b', ':func:torch.sum', '``x += y``']
    """
    found = []
    for token in _MARKUP.findall(text):
        if token.startswith(":"):
            role, _, rest = token[1:].partition(":`")
            target = re.search(r"<([^>]+)>`$", rest)
            found.append(f":{role}:{target.group(1) if target else rest[:-1].lstrip('~!')}")
        elif token.startswith("``"):
            found.append(token)
        else:
            found.append(re.sub(r"^`[^`<]*", "`", token))
    return sorted(found)


def catalogues(srcdir: str | Path, language: str) -> list[Path]:
    """Every .po file of ``language`` under docs/locale."""
    folder = Path(srcdir) / "locale" / language / "LC_MESSAGES"
    return sorted(folder.rglob("*.po")) if folder.is_dir() else []


#: A line of a .po file: blank, a comment, a keyword with one closed string, or a
#: continuation string. Babel forgives an unclosed string by dropping it; we don't.
_PO_LINE = re.compile(
    r'^(?:\s*|#.*|(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+"(?:[^"\\]|\\.)*"\s*'
    r'|"(?:[^"\\]|\\.)*"\s*)$'
)


def read_catalogue(path: Path):
    """Parse one .po file; a syntax error fails the build naming the file and line."""
    from babel.messages.pofile import PoFileError, read_po  # noqa: PLC0415

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not _PO_LINE.match(line):
            msg = f"{path}:{number}: this translation catalogue cannot be read: {line!r} is not a .po line (an unclosed string?)"
            raise ExtensionError(msg)
    try:
        with path.open("rb") as f:
            return read_po(f, abort_invalid=True)
    except PoFileError as exc:
        line = exc.lineno + 1  # babel counts lines from 0
        msg = f"{path}:{line}: this translation catalogue cannot be read: {exc}"
        raise ExtensionError(msg) from exc


_ROLE = re.compile(r":[\w:+-]+:`([^`]+)`")


def rst_problems(text: str) -> list[str]:
    """What docutils reports when it parses ``text`` as reST (roles read as literals).

    Examples
    --------
    >>> rst_problems("Call :func:`torch.compile` once.")
    []
    >>> rst_problems("调用 ``x``（一次）")[0]
    'Inline literal start-string without end-string.'
    """
    from docutils.core import publish_doctree  # noqa: PLC0415

    # Roles become inline literals: the same rules for where inline markup may start
    # and end, without touching the roles Sphinx has registered in this process.
    plain = _ROLE.sub(lambda m: "``" + m.group(1).replace("`", "") + "``", text)
    settings = {
        "report_level": 5,
        "halt_level": 5,
        "warning_stream": False,
        "file_insertion_enabled": False,
        "raw_enabled": False,
    }
    doctree = publish_doctree(plain, settings_overrides=settings)
    return [
        message.children[0].astext() if message.children else message.astext()
        for message in doctree.findall(nodes.system_message)
        if message["level"] >= 2
    ]


def check_catalogue(path: Path, syntax: str = "rst") -> Coverage:
    """Validate one catalogue's markup and count its messages.

    A translated message whose roles, literals or link targets differ from its English,
    or (for a page written in reST) that docutils cannot parse where its English parses,
    fails the build with the file and the line of the message.
    """
    catalog = read_catalogue(path)
    translated = fuzzy = total = 0
    for message in catalog:
        if not message.id:
            continue  # the header
        total += 1
        if message.fuzzy:
            fuzzy += 1
            continue
        if not message.string:
            continue
        if _markup(message.id) != _markup(message.string):
            lineno = message.lineno
            msg = (
                f"{path}:{lineno}: the translation's reST markup does not match its English "
                f"(English has {_markup(message.id)}, the translation {_markup(message.string)})"
            )
            raise ExtensionError(msg)
        if syntax == "rst":
            new = set(rst_problems(message.string)) - set(rst_problems(message.id))
            if new:
                msg = (
                    f"{path}:{message.lineno}: the translation is not valid reST: "
                    f"{'; '.join(sorted(new))} (inline markup next to a full-width character "
                    "needs an escaped space, e.g. ``x``\\ （)"
                )
                raise ExtensionError(msg)
        translated += 1
    return Coverage(translated, fuzzy, total)


def syntax_of(srcdir: str | Path, catalogue: Path, language: str) -> str:
    """ "md" for a catalogue of a MyST page, else "rst" (gallery pages, API pages)."""
    root = Path(srcdir) / "locale" / language / "LC_MESSAGES"
    docname = catalogue.relative_to(root).with_suffix("")
    return "md" if (Path(srcdir) / docname).with_suffix(".md").is_file() else "rst"


def check_catalogues(srcdir: str | Path, language: str) -> Coverage:
    """Check every catalogue of ``language``; return their message counts together."""
    counts = [
        check_catalogue(path, syntax_of(srcdir, path, language))
        for path in catalogues(srcdir, language)
    ]
    return Coverage(
        sum(c.translated for c in counts),
        sum(c.fuzzy for c in counts),
        sum(c.total for c in counts),
    )


def _check_catalogues(app) -> None:
    """builder-inited: every catalogue of a translated build must parse and keep its markup."""
    language = language_of(app)
    if language == "en" or app.builder.name == "gettext":
        return
    if not catalogues(app.srcdir, language):
        msg = f"no catalogues for language {language!r} under {Path(app.srcdir) / 'locale'}"
        raise ExtensionError(msg)
    counts = check_catalogues(app.srcdir, language)
    logger.info(
        "effpt: %s catalogues: %d messages, %d fuzzy (fuzzy ones are shown in English)",
        language,
        counts.total,
        counts.fuzzy,
    )


def page_coverage(doctree) -> Coverage:
    """How many of a translated page's messages the catalogues translated.

    Counted on the page as it is now, after Sphinx applied the catalogues: a message
    that changed in English since it was translated counts as untranslated.
    """
    from sphinx.util.nodes import extract_messages  # noqa: PLC0415

    total = translated = 0
    for node, _message in extract_messages(doctree):
        total += 1
        translated += bool(node.get("translated"))
    return Coverage(translated, 0, total)


def _keep_docstrings_english(app, doctree) -> None:  # noqa: ARG001  (Sphinx's signature)
    """doctree-read: the API reference's docstrings stay English in every edition.

    They are effpt's own documentation, the text ``help()`` prints; translating them
    would fork it. The reference's page titles and introductions are translated.
    """
    for element in doctree.findall(nodes.TextElement):
        if ":docstring of " in (element.source or ""):
            element["translatable"] = False
    # "Parameters", "Returns", "Raises": Sphinx writes these field names in the build's
    # language itself; they are not this site's messages.
    for element in doctree.findall(addnodes.desc_content):
        for name in element.findall(nodes.field_name):
            name["translatable"] = False


def _count_page(app, doctree) -> None:
    """doctree-read: remember each translated page's coverage."""
    if language_of(app) == "en" or app.builder.name == "gettext":
        return
    if not hasattr(app.env, "effpt_coverage"):
        app.env.effpt_coverage = {}
    app.env.effpt_coverage[app.env.docname] = page_coverage(doctree)


def _forget_page(app, env, docname: str) -> None:  # noqa: ARG001  (Sphinx's signature)
    getattr(env, "effpt_coverage", {}).pop(docname, None)


def _report_coverage(app, exception) -> None:
    """build-finished: print the share translated; fail below the threshold."""
    language = language_of(app)
    if exception is not None or language == "en" or app.builder.name == "gettext":
        return
    per_doc = getattr(app.env, "effpt_coverage", {})
    whole = Coverage(
        sum(c.translated for c in per_doc.values()), 0, sum(c.total for c in per_doc.values())
    )
    stale = sorted(doc for doc, c in per_doc.items() if c.translated < c.total)
    logger.info(
        "effpt: %s translation: %.1f %% of %d messages translated and not fuzzy; "
        "%d of %d pages show some English%s",
        language,
        100 * whole.share,
        whole.total,
        len(stale),
        len(per_doc),
        f" ({', '.join(stale[:8])}{', ...' if len(stale) > 8 else ''})" if stale else "",
    )
    threshold = float(app.config.effpt_translation_threshold)
    if whole.share < threshold:
        msg = (
            f"the {language} translation covers {whole.share:.1%} of its messages, below "
            f"effpt_translation_threshold = {threshold:.0%}; run `nox -s translations` "
            "and translate what it lists"
        )
        raise ExtensionError(msg)


def _note_stale(app, doctree, docname: str) -> None:
    """doctree-resolved: say on a translated page that parts of it are still English."""
    if language_of(app) == "en":
        return
    coverage = getattr(app.env, "effpt_coverage", {}).get(docname)
    if coverage is None or coverage.translated == coverage.total:
        return
    language = language_of(app)
    missing = coverage.total - coverage.translated
    # The English site is the parent of this one: up to this site's root, then one more.
    english = "../" * (docname.count("/") + 1) + docname + ".html"
    note = nodes.container(classes=["effpt-stale"])
    paragraph = nodes.paragraph()
    paragraph += nodes.Text(
        translate(
            language,
            "This translation is older than the English page: {count} of its {total} "
            "passages are shown in English until they are translated.",
            count=missing,
            total=coverage.total,
        )
        + " "
    )
    paragraph += nodes.reference("", translate(language, "Read the English page"), refuri=english)
    note += paragraph
    sections = list(doctree.findall(nodes.section))
    target = sections[0] if sections else doctree
    index = next((i for i, child in enumerate(target) if isinstance(child, nodes.title)), -1)
    target.insert(index + 1, note)


_THUMB_TITLE = re.compile(r'(<div class="sphx-glr-thumbnail-title">)(.*?)(</div>)', re.DOTALL)
_TOOLTIP = re.compile(r'(<div class="sphx-glr-thumbcontainer" tooltip=")[^"]*(")')


def _translate_thumbnails(app, doctree, docname: str) -> None:  # noqa: ARG001
    """doctree-resolved: gallery cards in the reader's language.

    sphinx-gallery writes each card's title and tooltip as raw HTML, which catalogues
    cannot reach. In a translated build both become the page's translated title, which
    Sphinx has from the page's own catalogue.
    """
    if language_of(app) == "en":
        return
    from effpt_site.layout import example_pages, examples_dir  # noqa: PLC0415

    translated = {}
    for stem, page in example_pages(app).items():
        script = examples_dir(app) / page.split("/")[-2] / f"{stem}.py"
        lines = script.read_text(encoding="utf-8").splitlines()
        english = lines[1].replace("``", "").strip() if len(lines) > 1 else ""
        if page in app.env.titles:
            translated[english] = app.env.titles[page].astext()
    pending_tooltip = None
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if 'class="sphx-glr-thumbcontainer" tooltip="' in text:
            pending_tooltip = raw
        match = _THUMB_TITLE.search(text)
        if match is None:
            continue
        title = translated.get(html.unescape(match.group(2)).strip())
        if title is None:
            continue
        escaped = html.escape(title)
        new = _THUMB_TITLE.sub(lambda m, e=escaped: m.group(1) + e + m.group(3), text)
        raw.replace(raw.children[0], nodes.Text(new))
        if pending_tooltip is not None:
            old = pending_tooltip.astext()
            new = _TOOLTIP.sub(lambda m, e=escaped: m.group(1) + e + m.group(2), old)
            pending_tooltip.replace(pending_tooltip.children[0], nodes.Text(new))
            pending_tooltip = None


#: pydata-sphinx-theme options that are text a reader sees, per language.
THEME_TEXT = {"zh_CN": {"search_bar_text": "搜索文档……", "icon_links_label": "图标链接"}}


def _theme_text(app, config) -> None:  # noqa: ARG001  (Sphinx's signature)
    """config-inited: the theme's visible option texts in the build's language."""
    options = THEME_TEXT.get(config.language or "en")
    if options:
        config.html_theme_options = {**config.html_theme_options, **options}


def chinese_search_language():
    """Sphinx's Chinese search language, with a JavaScript stemmer that exists.

    Sphinx 9.0 ends language_data.js with ``window.Stemmer = <language_name>Stemmer``,
    but Chinese search ships the English stemmer, so the Chinese pages' search stopped
    with "ChineseStemmer is not defined" and found nothing (sphinx-doc/sphinx#14229,
    fixed upstream by naming the class after the stemmer file). The subclass names its
    language after the stemmer it ships; the Python side is Sphinx's own.
    """
    from sphinx.search.zh import SearchChinese  # noqa: PLC0415  (needs jieba: docs only)

    stemmer = SearchChinese.js_stemmer_rawcode.removesuffix("-stemmer.js").capitalize()
    if SearchChinese.language_name == stemmer:
        return SearchChinese

    class SearchChineseWithItsStemmer(SearchChinese):
        language_name = stemmer

    return SearchChineseWithItsStemmer


def _search_language(app, config) -> None:
    if (config.language or "en").startswith("zh"):
        app.add_search_language(chinese_search_language())


def setup(app) -> None:
    # A string default, so that -D effpt_translation_threshold=0.5 can override it
    # (Sphinx converts -D values only for str, int, bool and list defaults).
    app.add_config_value("effpt_translation_threshold", "0.95", "env", types=(float, str))
    app.connect("config-inited", _theme_text)
    app.connect("config-inited", _search_language)
    app.connect("builder-inited", _check_catalogues)
    app.connect("doctree-read", _keep_docstrings_english, priority=400)
    app.connect("doctree-read", _count_page, priority=600)
    app.connect("env-purge-doc", _forget_page)
    app.connect("doctree-resolved", _note_stale)
    app.connect("doctree-resolved", _translate_thumbnails)
    app.connect("build-finished", _report_coverage)
