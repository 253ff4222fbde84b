"""The offline copy of the site: pack it into one zip, and check it opens from ``file://``.

``pack ROOT ZIP VERSION`` writes ZIP holding, under ``effpt-site-VERSION/``:

* ``site/``: the built HTML site (docs/_build/html), without Sphinx's caches and the
  theme's source maps;
* ``pages/FAMILY/plot_*.py`` and ``.ipynb``: every gallery page as a script and a
  notebook, as the build wrote them;
* ``site/packages/``: within the site, effpt's wheel and sdist, which every page's
  install line names (``pip install --find-links`` reads the folder offline too);
* ``constraints.txt``: the exact versions the site was built with;
* ``MACHINE.txt``: when and on which machine the site was built and each page ran;
* ``README.txt``: what is inside and how to use it.

``check ZIP`` unpacks it into a temporary folder and opens pages from ``file://`` in
headless Chromium, failing on a stylesheet, script, font or picture that did not load,
on a console error, and on pictures that did not decode; and it searches for
"broadcast", expecting the broadcasting page among the results. Search is the one
feature that does less from files: browsers refuse the requests it makes for each
result's excerpt between ``file://`` pages, so results come without excerpts (the
README says so, and how to serve the folder instead).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import tempfile
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import evidence
from chromium import webdriver

#: What is left out of the site: Sphinx's caches and build info, the theme's source maps.
SKIP = re.compile(r"(^|/)(\.doctrees|\.buildinfo[^/]*)(/|$)|\.map$")

README = """\
Effective PyTorch {version}: the offline copy
{underline}

A guide to writing PyTorch well, in which every page is produced by running code.
This archive holds the whole site as it was built on {built_on}, and every lesson as a
script and a notebook you can run.

  site/index.html     the site: open it in a browser (double-click works).
  pages/              every lesson, by family in reading order, as plot_*.py and
                      plot_*.ipynb. Each runs on its own after one line:
                          {install}
                          python plot_fitting_a_curve.py
                      The line takes effpt from the site; this copy carries it too,
                      in site/packages/. Without the site, from this folder:
                          pip install effpt=={version} --find-links site/packages
  site/packages/      effpt {version}'s wheel and sdist, the ones the pages name.
  constraints.txt     the exact versions of everything the site was built with (pip
                      install -c constraints.txt effpt=={version} --find-links
                      site/packages reproduces them).
  MACHINE.txt         when, and on which machine, the site was built and each page ran.

Opened from the files, search lists the matching pages but shows no excerpt under
each: browsers do not let a page opened from a file read the others. For excerpts,
serve the folder and open http://127.0.0.1:8000:

    python -m http.server --directory site 8000

The lessons, in reading order:
{lessons}
"""


def _build_info(site: Path) -> dict:
    """What the English build wrote about itself (effpt_site.cards.write_build_info)."""
    path = site / "effpt-build.json"
    if not path.is_file():
        msg = f"{path} is missing: run `nox -s docs` (the build writes it)"
        raise SystemExit(msg)
    return json.loads(path.read_text(encoding="utf-8"))


def _layout(root: Path, name: str = "layout"):
    """docs/_ext/effpt_site/NAME.py (layout, outputs), alone: the package imports Sphinx."""
    path = root / "docs" / "_ext" / "effpt_site" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"effpt_site_{name}", path)
    layout = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layout)
    return layout


def _title(script: Path) -> str:
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    lines = [line.strip() for line in docstring.splitlines() if line.strip()]
    return lines[0].replace("``", "") if lines else script.stem


def pack(root: Path, out: Path, version: str) -> None:
    site = root / "docs" / "_build" / "html"
    generated = root / "docs" / "auto_examples"
    top = f"effpt-site-{version}"
    layout = _layout(root)
    info = _build_info(site)
    lessons, pages = [], []
    for number, family in enumerate(info["families"], start=1):
        folder = root / "examples" / family
        title, _ = layout.header_title_and_intro(folder)
        lessons.append(f"  {number}. {title} (pages/{family}/)")
        for name in layout.reading_order(folder):
            script = generated / family / name
            notebook = script.with_suffix(".ipynb")
            for path in (script, notebook):
                if not path.is_file():
                    msg = f"{path} is missing: run `nox -s docs` (it writes every page)"
                    raise SystemExit(msg)
                pages.append((path, f"{top}/pages/{family}/{path.name}"))
            lessons.append(f"       {name:38} {_title(folder / name)}")
    packages = _layout(root, "packages")
    served = packages.served_versions(site / packages.FOLDER)
    if version not in served:
        msg = (
            f"{site / packages.FOLDER} does not serve effpt {version} (it serves "
            f"{', '.join(sorted(served)) or 'nothing'}): run `nox -s docs`, which writes it"
        )
        raise SystemExit(msg)
    machine_class = evidence.machine_class(root)
    stamps = []
    conf = {"src_dir": generated.parent, "gallery_dirs": generated.name}
    outputs = _layout(root, "outputs")
    for page, data in outputs.stamps(conf).items():
        machine_line = machine_class.in_file(data, outputs.stamp_file(conf, page))
        stamps.append(f"  {page:36} ran {data['executed_at']} on {machine_line}")
    built_on = info["built"].removeprefix("Built on ").rstrip(".")
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = "\n".join(
        [
            f"Effective PyTorch {version}, offline copy made {made}.",
            f"The site was built on {built_on}.",
            "",
            "Each page's code ran as follows (the same line is on the page):",
            *stamps,
            "",
        ]
    )
    readme = README.format(
        version=version,
        underline="=" * len(f"Effective PyTorch {version}: the offline copy"),
        built_on=built_on.split(" on ")[0],
        install=packages.install_command(version),
        lessons="\n".join(lessons),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr(f"{top}/README.txt", readme)
        zf.writestr(f"{top}/MACHINE.txt", machine)
        zf.write(root / "constraints.txt", f"{top}/constraints.txt")
        for path, name in pages:
            zf.write(path, name)
        for path in sorted(site.rglob("*")):
            relative = path.relative_to(site).as_posix()
            if path.is_file() and not SKIP.search(relative):
                zf.write(path, f"{top}/site/{relative}")
                count += 1
    size = out.stat().st_size / 1e6
    print(f"{out}: {count} site files, {len(pages)} scripts and notebooks, {size:.1f} MB")


# -- opening the unpacked copy from file:// --------------------------------------------------

EAGER_JS = """
document.querySelectorAll('img[loading=lazy]').forEach(img => { img.loading = 'eager'; });
"""

LOADED_JS = """
const sheets = Array.from(document.querySelectorAll('link[rel=stylesheet]'))
  .filter(l => !l.sheet).map(l => 'stylesheet did not load: ' + l.href);
window.scrollTo(0, document.body.scrollHeight);
const images = Array.from(document.images)
  .filter(img => !img.complete || img.naturalWidth === 0)
  .map(img => 'picture did not decode: ' + (img.currentSrc || img.src));
const styled = getComputedStyle(document.querySelector('.bd-header')).position;
const unstyled = styled === 'static' ? ['the page is unstyled (header not sticky)'] : [];
return sheets.concat(images, unstyled);
"""

FONTS_JS = """
const done = arguments[arguments.length - 1];
document.fonts.ready.then(() => done(Array.from(document.fonts)
  .filter(f => f.status === 'error').map(f => 'font did not load: ' + f.family)));
"""


SEARCH_JS = """
return Array.from(document.querySelectorAll('#search-results a'))
  .some(a => a.href.includes('broadcasting'));
"""


def _pages(site: Path) -> list[Path]:
    picks = [site / "index.html", site / "measurements.html", site / "api" / "index.html"]
    gallery = sorted((site / "auto_examples").glob("*/plot_*.html"))
    families = sorted({p.parent for p in gallery})[:3]
    picks += [next(p for p in gallery if p.parent == family) for family in families]
    picks += sorted((site / "explanations").glob("*.html"))[:1]
    return [p for p in picks if p.is_file()]


def check(archive: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)
        (top,) = Path(tmp).iterdir()
        site = top / "site"
        driver = webdriver(f"{tmp}/chromium-profile")
        failures: dict[str, list[str]] = {}
        try:
            for page in _pages(site):
                driver.get(page.as_uri())
                driver.execute_script(EAGER_JS)  # every picture, not only those on screen
                time.sleep(1.0)
                problems = list(driver.execute_script(LOADED_JS))
                time.sleep(0.5)
                problems += driver.execute_async_script(FONTS_JS)
                problems += [
                    f"console: {e['message']}"
                    for e in driver.get_log("browser")
                    if e["level"] == "SEVERE"
                ]
                for entry in driver.get_log("performance"):
                    message = json.loads(entry["message"])["message"]
                    if message["method"] == "Network.loadingFailed":
                        params = message["params"]
                        if not params.get("canceled"):
                            problems.append(f"request failed: {params.get('errorText')}")
                name = page.relative_to(site).as_posix()
                print(f"{'FAIL' if problems else 'ok  '} file://.../{name}", flush=True)
                if problems:
                    failures[name] = problems
            driver.get((site / "search.html").as_uri() + "?q=broadcast")
            found = False
            for _ in range(60):
                found = driver.execute_script(SEARCH_JS)
                if found:
                    break
                time.sleep(0.5)
            print(f"{'ok  ' if found else 'FAIL'} search for 'broadcast' from file://")
            if not found:
                failures["search.html"] = ["searching 'broadcast' listed no broadcasting page"]
        finally:
            driver.quit()
    for name, problems in failures.items():
        print(f"\n{name} (opened from file://):")
        for problem in problems:
            print(f"  - {problem}")
    return 1 if failures else 0


def main() -> int:
    command, *args = sys.argv[1:]
    if command == "pack":
        root, out, version = args
        pack(Path(root), Path(out), version)
        return 0
    if command == "check":
        return check(Path(args[0]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
