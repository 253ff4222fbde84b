"""Open the built site in headless Chromium as a reader would, and fail on what they'd hit.

For every page (landing, each gallery page, API reference, measurements, explanations)
it fails on: a console error, a failed request, a request to any host but the local
server, an image that did not decode, a page heavier than the budget, serious or
critical accessibility violations found by axe-core, and an icon whose code point the
font the page loaded lacks (a missing-glyph box: :mod:`glyphs`). The glyph check also
runs on every other page of both editions (search, index, compatibility...). It also searches for "broadcast"
(and the Chinese edition for 广播) and expects the broadcasting page among the results,
and follows the language switch from a page to its Chinese version and back. On a
gallery page in each language it checks the Colab link's form, the before-you-start box
(its heading and parts in that language, under the title; its links open), the prefilled
report link, the plain-text copy and its line in llms.txt, and follows each related
page. Screenshots are saved for review.

Usage: python browser_check.py SITE_DIR AXE_JS SCREENSHOT_DIR
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import suppress
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import glyphs
from chromium import report_failures, serve, webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.ui import WebDriverWait

PAGE_BUDGET_BYTES = 1_500_000
SERIOUS = {"serious", "critical"}


def network_problems(driver, base: str) -> tuple[list[str], int]:
    """Requests to other hosts, failed or non-2xx/3xx requests, and bytes transferred."""
    problems, total = [], 0
    urls = {}
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        method, params = message["method"], message.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            urls[params["requestId"]] = url
            if urlparse(url).scheme in {"http", "https", "ws", "wss"} and not url.startswith(base):
                problems.append(f"request to another host: {url}")
        elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
            problems.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            url = urls.get(params["requestId"], "?")
            problems.append(f"failed request: {url} ({params.get('errorText')})")
        elif method == "Network.loadingFinished":
            total += int(params.get("encodedDataLength", 0))
    return problems, total


# Pictures load lazily, as a reader scrolls near them: ask for every one now, wait until
# each has loaded or failed (:data:`IMAGES_WAIT_S` at most: on a loaded machine a fixed
# pause was too short, and a picture still loading read as broken), then list those that
# did not load or decode.
EAGER_IMAGES_JS = """
document.querySelectorAll('img[loading=lazy]').forEach(img => { img.loading = 'eager'; });
window.scrollTo(0, document.body.scrollHeight);
"""
LOADING_IMAGES_JS = "return Array.from(document.images).filter(img => !img.complete).length;"
BROKEN_IMAGES_JS = """
return Array.from(document.images)
  .filter(img => !img.complete || img.naturalWidth === 0)
  .map(img => [img.currentSrc || img.src, img.complete]);
"""
IMAGES_WAIT_S = 20


def broken_images(driver) -> list[str]:
    """Every picture of the open page that did not load or decode, each with the reason."""
    driver.execute_script(EAGER_IMAGES_JS)
    with suppress(TimeoutException):  # those still loading are listed below
        WebDriverWait(driver, IMAGES_WAIT_S, poll_frequency=0.1).until(
            lambda d: d.execute_script(LOADING_IMAGES_JS) == 0
        )
    return [
        f"image did not decode: {src}"
        if complete
        else f"image still loading after {IMAGES_WAIT_S} s: {src}"
        for src, complete in driver.execute_script(BROKEN_IMAGES_JS)
    ]


AXE_JS = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ['violations']})
  .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                          nodes: v.nodes.length,
                                          target: v.nodes[0] && v.nodes[0].target}))))
  .catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: 0}]));
"""


def open_page(driver, base: str, path: str) -> None:
    driver.get(f"{base}/{path}")
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def check_page(
    driver, base: str, path: str, axe_source: str, cmap_of
) -> tuple[list[str], list[dict]]:
    open_page(driver, base, path)
    time.sleep(0.3)  # late scripts (search index, theme) settle
    problems = [
        f"console: {e['message']}" for e in driver.get_log("browser") if e["level"] == "SEVERE"
    ]
    problems += broken_images(driver)
    net, size = network_problems(driver, base)
    problems += net
    if size > PAGE_BUDGET_BYTES:
        problems.append(f"page weighs {size / 1e6:.2f} MB (budget {PAGE_BUDGET_BYTES / 1e6} MB)")
    problems += glyphs.check_page(driver, cmap_of)
    driver.execute_script(axe_source)
    violations = driver.execute_async_script(AXE_JS)
    problems += [
        f"axe {v['impact']}: {v['id']} ({v['help']}), {v['nodes']} node(s), e.g. {v['target']}"
        for v in violations
        if v["impact"] in SERIOUS
    ]
    return problems, violations


def check_search(driver, base: str, prefix: str = "", term: str = "broadcast") -> list[str]:
    """Search the (English or Chinese) site for ``term``; the broadcasting page must be found."""
    driver.get(f"{base}/{prefix}search.html?q={quote(term)}")
    try:
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script(
                "return Array.from(document.querySelectorAll('#search-results a'))"
                ".some(a => a.href.includes('broadcasting'))"
            )
        )
    except Exception:  # noqa: BLE001  (turned into a readable failure)
        return [f"search for {term!r} did not list a broadcasting page"]
    return []


def check_language_switch(driver, base: str, path: str) -> list[str]:
    """The switch leads from a page to the same page in Chinese, and back again."""
    problems = []
    for start, expected, lang in [
        (path, f"zh_CN/{path}", "zh-CN"),
        (f"zh_CN/{path}", path, "en"),
    ]:
        driver.get(f"{base}/{start}")
        links = driver.find_elements("css selector", "a.effpt-language")
        if not links:
            problems.append(f"{start}: no language switch")
            continue
        driver.get(links[0].get_attribute("href"))
        landed = urlparse(driver.current_url).path.lstrip("/")
        page_lang = driver.execute_script("return document.documentElement.lang")
        if landed != expected or not page_lang.lower().startswith(lang.lower()[:2]):
            problems.append(
                f"{start}: the switch led to {landed!r} (lang {page_lang!r}), "
                f"expected {expected!r} in {lang}"
            )
    return problems


READER_LINKS_JS = """
const pick = sel => Array.from(document.querySelectorAll(sel)).map(a => ({
  href: a.href, text: a.textContent.trim(), visible: a.getClientRects().length > 0}));
return {colab: pick('a.effpt-colab'), report: pick('.effpt-report a'),
        related: pick('.effpt-related a'),
        heading: (document.querySelector('#effpt-related-heading') || {}).textContent || '',
        box: (() => {
          const box = document.querySelector('.effpt-before-you-start');
          if (!box) return null;
          const h1 = document.querySelector('h1');
          return {
            heading: (box.querySelector('.rubric') || {}).textContent || '',
            fields: Array.from(box.querySelectorAll('dt')).map(
              d => d.textContent.trim().replace(/[:：]$/, '')),
            visible: box.getClientRects().length > 0,
            after_title: !!(h1.compareDocumentPosition(box) & Node.DOCUMENT_POSITION_FOLLOWING),
            links: pick('.effpt-before-you-start a.reference.internal'),
          };
        })()};
"""


def check_reader_links(driver, base: str, path: str, language: str) -> list[str]:
    """A gallery page offers Colab, its before-you-start box, a prefilled report and related
    pages that open.

    The Colab and GitHub addresses are checked for their form only (nothing outside the
    local server can be reached); each related page is followed and must load.
    """
    driver.get(f"{base}/{path}")
    found = driver.execute_script(READER_LINKS_JS)
    problems = []
    stem = Path(path).stem
    family = Path(path).parent.name
    colab = "https://colab.research.google.com/github/effpt/effpt/blob/notebooks/"
    expected_words = {
        "en": ("Run in Google Colab", "Report a problem with this page", "Related pages"),
        "zh": ("在 Google Colab 中运行", "报告本页的问题", "相关页面"),
    }[language]
    if [c["href"] for c in found["colab"]] != [f"{colab}{family}/{stem}.ipynb"]:
        problems.append(f"Colab link {found['colab']} is not {colab}{family}/{stem}.ipynb")
    elif found["colab"][0]["text"] != expected_words[0] or not found["colab"][0]["visible"]:
        problems.append(f"Colab link reads {found['colab'][0]['text']!r} or is hidden")
    if len(found["report"]) != 1:
        problems.append(f"expected one report link, found {len(found['report'])}")
    else:
        report = urlparse(found["report"][0]["href"])
        fields = parse_qs(report.query)
        body = fields.get("body", [""])[0]
        if (report.netloc, report.path) != ("github.com", "/effpt/effpt/issues/new"):
            problems.append(f"report link goes to {report.netloc}{report.path}")
        for line in ("Page: https://effpt.github.io/effpt/", "effpt: ", "torch: ", "Machine"):
            if line not in body:
                problems.append(f"report body lacks {line!r}: {body!r}")
        if path not in body or found["report"][0]["text"] != expected_words[1]:
            problems.append(f"report names another page or reads {found['report'][0]['text']!r}")
    box_words = {
        "en": (
            "Before you start",
            ["What you will learn", "Read first", "What it needs", "Run it on its own", "Run time"],
        ),
        "zh": ("开始之前", ["你将学到", "先读", "所需环境", "单独运行本页", "运行时间"]),
    }[language]
    box = found["box"]
    if box is None:
        problems.append("no before-you-start box")
    elif (box["heading"].strip(), box["fields"]) != box_words or not box["visible"]:
        problems.append(f"before-you-start box reads {box['heading']!r} {box['fields']}")
    elif not box["after_title"]:
        problems.append("the before-you-start box is not under the title")
    if found["heading"] != expected_words[2] or not found["related"]:
        problems.append(f"related pages: heading {found['heading']!r}, {found['related']}")
    # The plain-text copy beside the page, listed in the edition's llms.txt.
    prefix = "zh_CN/" if path.startswith("zh_CN/") else ""
    text_copy = path.removesuffix(".html") + ".txt"
    driver.get(f"{base}/{prefix}llms.txt")
    listing = driver.execute_script("return document.body.innerText")
    if f"/effpt/{text_copy})" not in listing:
        problems.append(f"{prefix}llms.txt does not list {text_copy}")
    driver.get(f"{base}/{text_copy}")
    copy = driver.execute_script("return document.body.innerText")
    if "print(" not in copy or len(copy) < 500:
        problems.append(f"{text_copy} is not the page's text with its code: {copy[:200]!r}")
    for link in (box or {}).get("links", []):  # what to read first must open
        driver.get(link["href"])
        if not driver.execute_script("return document.querySelector('h1') !== null"):
            problems.append(f"read-first link {link['href']} did not load a page")
    for link in found["related"]:
        driver.get(link["href"])
        title = driver.execute_script("return document.querySelector('h1').textContent")
        if urlparse(link["href"]).path == urlparse(f"{base}/{path}").path or not title:
            problems.append(f"related page {link['href']} is this page or did not load")
        elif link["text"] not in title:
            problems.append(f"related link {link['text']!r} led to a page titled {title!r}")
    return problems


def main() -> int:
    site, axe_js, shots = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    shots.mkdir(parents=True, exist_ok=True)
    pages = ["index.html", "measurements.html", "torch_index.html", "api/index.html"]
    pages += sorted(str(p.relative_to(site)) for p in (site / "api").glob("*.html"))
    pages += sorted(str(p.relative_to(site)) for p in (site / "explanations").glob("*.html"))
    pages += sorted(str(p.relative_to(site)) for p in (site / "auto_examples").rglob("*.html"))
    pages = list(dict.fromkeys(pages))
    if not (site / "zh_CN" / "index.html").is_file():
        print(f"FAIL: no Chinese edition in {site / 'zh_CN'}: build it with `nox -s docs`")
        return 1
    pages += [f"zh_CN/{path}" for path in pages if (site / "zh_CN" / path).is_file()]
    axe_source = axe_js.read_text(encoding="utf-8")
    server, base = serve(site)
    base = base.rstrip("/")  # pages below are joined as f"{base}/{path}"
    driver = webdriver(f"/tmp/effpt-chromium-{time.time_ns()}", "--disable-quic")
    cmap_of = glyphs.site_cmaps(site, f"{base}/")
    failures: dict[str, list[str]] = {}
    all_violations: dict[str, int] = {}
    try:
        for path in pages:
            problems, violations = check_page(driver, base, path, axe_source, cmap_of)
            for v in violations:
                all_violations[f"{v['impact']}: {v['id']}"] = (
                    all_violations.get(f"{v['impact']}: {v['id']}", 0) + 1
                )
            if problems:
                failures[path] = problems
            print(f"{'FAIL' if problems else 'ok  '} {path}", flush=True)
        others = [path for path in glyphs.site_pages(site) if path not in set(pages)]
        for path in others:  # every other page: its icons only
            open_page(driver, base, path)
            problems = glyphs.check_page(driver, cmap_of)
            if problems:
                failures[path] = problems
            print(f"{'FAIL' if problems else 'ok  '} {path} (icons only)", flush=True)
        first_example = next((p for p in pages if "/plot_" in p), None)
        for name, path in [
            ("landing", "index.html"),
            ("measurements", "measurements.html"),
            ("gallery-page", first_example),
        ]:
            if path:
                driver.get(f"{base}/{path}")
                driver.save_screenshot(str(shots / f"{name}.png"))
        for prefix, term in [("", "broadcast"), ("zh_CN/", "广播")]:
            search = check_search(driver, base, prefix, term)
            driver.save_screenshot(str(shots / f"search{'-zh_CN' if prefix else ''}.png"))
            if search:
                failures[f"{prefix}search.html"] = search
            print(f"{'FAIL' if search else 'ok  '} search {prefix or 'en'} for {term!r}")
        if first_example:
            for path, language in [(first_example, "en"), (f"zh_CN/{first_example}", "zh")]:
                links = check_reader_links(driver, base, path, language)
                if links:
                    failures[f"reader links on {path}"] = links
                print(
                    f"{'FAIL' if links else 'ok  '} Colab, before-you-start box, report and related pages on {path}"
                )
        for path in ("index.html", first_example):
            if path:
                switch = check_language_switch(driver, base, path)
                if switch:
                    failures[f"switch on {path}"] = switch
                print(f"{'FAIL' if switch else 'ok  '} language switch on {path}, both ways")
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    print(f"\n{len(pages)} pages checked, {len(others)} more for icons; screenshots in {shots}")
    if all_violations:
        print("axe-core findings (all impacts; pages affected):")
        for key, count in sorted(all_violations.items()):
            print(f"  {key}: {count}")
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
