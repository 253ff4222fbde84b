"""The site in each language: this extension's own strings, and the translated build's settings.

The pages' text is translated the standard way: ``nox -s translations`` runs Sphinx's
gettext builder and ``sphinx-intl``, translators edit docs/locale/zh_CN/LC_MESSAGES/*.po,
and ``nox -s docs`` builds the Chinese site from the same executed pages (nothing runs
twice). This module holds what that pipeline lacks:

* the few strings this extension writes itself (the run stamp, the torch badge, table
  headers), in :data:`MESSAGES`, used through :func:`translate`; volatile text such as
  dates, machines and timings is rendered by directives whose nodes are never extracted
  as messages (:func:`freeze`);
* the theme's visible option texts and Chinese search, per language;
* the API reference's docstrings stay English (they are effpt's own documentation).

The catalogues' checks are in :mod:`effpt_site.catalogues`, the coverage count and the
"still English" note in :mod:`effpt_site.coverage`, the gallery's cards in
:mod:`effpt_site.thumbnails`.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx import addnodes

from effpt_site.catalogues import read_catalogue

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
    app.connect("config-inited", _theme_text)
    app.connect("config-inited", _search_language)
    app.connect("doctree-read", _keep_docstrings_english, priority=400)
