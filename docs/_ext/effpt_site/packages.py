"""The effpt a reader installs, served by the site itself.

Every page's install line is :func:`install_command`: ``pip install effpt==VERSION
--find-links https://effpt.github.io/effpt/packages/``. pip takes effpt from that
folder of the site (its wheel and sdist, built from this checkout when the English
site is written) and torch, NumPy, matplotlib and Pillow from PyPI, so the line works
the day the site is published whether or not effpt has reached PyPI. The release
workflow (.github/workflows/release.yml) still publishes the same version to PyPI.

``packages/index.html`` links each file with its ``#sha256=`` digest, which pip checks;
the offline archive carries the folder (``pip install --find-links site/packages``).

After writing the English site the build reads every page, notebook and script it
wrote and fails, naming the file, when an install line names a version the folder does
not serve or does not point at the folder (:func:`check_install_lines`).

Neither is redone for inputs that did not change: the wheel and sdist are built again
only when a file they are made from changed (:func:`distribution_inputs`), and a file of
the site is read for its install lines again only when its size or modification time
changed; every line found, remembered or read anew, is checked at every build.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

# Imports nothing of Sphinx or effpt at module level: the offline archive's tool
# (docs/_tools/archive.py) loads this module alone, in an environment without them.

#: The hosted site's address (docs/conf.py's ``html_baseurl`` is this).
SITE = "https://effpt.github.io/effpt/"
#: The folder of the site that holds effpt's wheel and sdist.
FOLDER = "packages"

_WHEEL = re.compile(r"^effpt-([^-]+)-py3-none-any\.whl$")
_SDIST = re.compile(r"^effpt-([^-]+)\.tar\.gz$")
#: An install line as a page shows it: ``pip install effpt==V`` and what follows it.
#: An address, up to the first character no address holds (a space, a full-width comma).
_URL = re.compile(r"[A-Za-z0-9:/._~%+\-]+")
_LINE = re.compile(r"pip install effpt==([^\s`'\"<),]+)([^`'\"<]{0,200})")


def packages_url(site: str = SITE) -> str:
    """The address of the served folder.

    Examples
    --------
    >>> packages_url("https://x.io/p")
    'https://x.io/p/packages/'
    """
    return site.rstrip("/") + f"/{FOLDER}/"


def install_command(version: str | None = None, site: str = SITE) -> str:
    """The one line that installs effpt (this one unless ``version``) and what pages need.

    Examples
    --------
    >>> install_command("1.2.3", "https://x.io/p/")
    'pip install effpt==1.2.3 --find-links https://x.io/p/packages/'
    """
    if version is None:
        import effpt  # noqa: PLC0415  (see the imports above)

        version = effpt.__version__
    return f"pip install effpt=={version} --find-links {packages_url(site)}"


def build_distributions(root: Path, folder: Path) -> list[Path]:
    """Build effpt's wheel and sdist from the checkout ``root`` into ``folder``.

    hatchling, effpt's own build backend, in this process: no network, no isolated
    environment; the same files ``python -m build`` makes.
    """
    from hatchling.builders.sdist import SdistBuilder  # noqa: PLC0415  (build-only)
    from hatchling.builders.wheel import WheelBuilder  # noqa: PLC0415

    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("effpt-*"):
        stale.unlink()
    built = [
        *WheelBuilder(str(root)).build(directory=str(folder), versions=["standard"]),
        *SdistBuilder(str(root)).build(directory=str(folder), versions=["standard"]),
    ]
    return sorted(Path(p) for p in built)


def served_versions(folder: Path) -> set[str]:
    """The versions whose wheel and sdist both lie in ``folder``."""
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    wheels = {m.group(1) for n in names if (m := _WHEEL.match(n))}
    sdists = {m.group(1) for n in names if (m := _SDIST.match(n))}
    return wheels & sdists


def write_index(folder: Path) -> Path:
    """``index.html``: a link to each file with its sha256, which ``--find-links`` reads."""
    rows = []
    for path in sorted(folder.glob("effpt-*")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        name = html.escape(path.name)
        rows.append(f'<li><a href="{name}#sha256={digest}">{name}</a></li>')
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="robots" content="noindex">',
            "<title>effpt packages</title></head><body>",
            "<h1>effpt packages</h1>",
            f"<p>Install with: <code>{html.escape(install_command())}</code></p>",
            "<ul>",
            *rows,
            "</ul>",
            "</body></html>",
            "",
        ]
    )
    index = folder / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def distribution_inputs(root: Path) -> str:
    """A digest of what effpt's wheel and sdist are built from in the checkout ``root``.

    Every file of ``src/effpt`` (byte code aside), the files the sdist adds, the
    version of hatchling and this module's code.
    """
    from importlib.metadata import version  # noqa: PLC0415

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(version("hatchling").encode())
    files = [root / name for name in ("pyproject.toml", "README.md", "LICENSE", ".gitignore")]
    files += sorted(
        p
        for p in (root / "src" / "effpt").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}
    )
    for path in files:
        data = path.read_bytes() if path.is_file() else b"(absent)"
        name = path.relative_to(root).as_posix().encode()
        digest.update(len(name).to_bytes(8, "little") + name)
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_packages(root: Path, folder: Path, record: Path | None = None) -> list[Path]:
    """The served folder: this checkout's wheel and sdist, and their index.

    With a ``record`` file, nothing is built when the inputs
    (:func:`distribution_inputs`) are those recorded and the folder still holds the
    files as they were written.
    """
    key = distribution_inputs(root) if record is not None else None
    if record is not None:
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            outputs = data["outputs"]
            if data["inputs"] == key and all(
                _sha(folder / name) == sha for name, sha in outputs.items()
            ):
                return sorted(folder / name for name in outputs if name != "index.html")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    built = build_distributions(root, folder)
    index = write_index(folder)
    if record is not None:
        outputs = {p.name: _sha(p) for p in [*built, index]}
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"inputs": key, "outputs": outputs}, indent=1), "utf-8")
    return built


def stated_commands(text: str, suffix: str = ".html") -> list[str]:
    """The install commands a page states, as a reader copies them.

    Examples
    --------
    >>> stated_commands('<code><span class="pre">pip</span> <span class="pre">install</span> '
    ...                 '<span class="pre">effpt==1.0</span> <span class="pre">--find-links</span> '
    ...                 '<span class="pre">http://h/packages/</span></code>, then')
    ['pip install effpt==1.0 --find-links http://h/packages/']
    >>> stated_commands("先 pip install effpt==1.0 --find-links http://h/packages/，再", ".txt")
    ['pip install effpt==1.0 --find-links http://h/packages/']
    """
    if suffix == ".ipynb":
        cells = json.loads(text).get("cells", [])
        text = "\n".join("".join(cell.get("source", [])) for cell in cells)
    elif suffix == ".html":
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    commands = []
    for match in _LINE.finditer(text):
        words = match.group(2).split()[:2]
        url = _URL.match(words[1]) if len(words) == 2 else None
        if words[:1] == ["--find-links"] and url:
            # An address is ASCII: a translated page's full-width comma ends it too.
            words[1] = url.group(0).rstrip(".,;")
        else:
            words = []
        commands.append(" ".join([f"pip install effpt=={match.group(1)}", *words]))
    return commands


def _remembered_lines(cache: Path | None) -> dict[str, list]:
    """Each file's size, modification time and install lines, as the last check read them."""
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (AttributeError, OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("code") != _sha(Path(__file__)):
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


def check_install_lines(
    site: Path, served: set[str] | None = None, cache: Path | None = None
) -> int:
    """Fail unless every install line in the built ``site`` uses a version it serves.

    Reads every ``.html``, ``.ipynb``, ``.py`` and ``.txt`` file under ``site`` (not
    in another language's build nested in it, which checks its own); each
    ``pip install effpt==V`` must name a version whose wheel and sdist lie in
    ``site/packages`` and go on with ``--find-links`` at that folder's address.
    With a ``cache`` file, a file whose size and modification time are those recorded
    there is not read again: its recorded lines are checked. Returns how many lines
    it checked.
    """
    if served is None:
        served = served_versions(site / FOLDER)
    url = packages_url()
    problems, count = [], 0
    nested = [p.parent for p in site.glob("*/searchindex.js")]
    known = _remembered_lines(cache)
    lines: dict[str, list] = {}
    for path in sorted(site.rglob("*")):
        if path.suffix not in {".html", ".ipynb", ".py", ".txt"} or not path.is_file():
            continue
        if any(path.is_relative_to(other) for other in [site / FOLDER, *nested]):
            continue
        where = path.relative_to(site).as_posix()
        stat = path.stat()
        entry = known.get(where)
        if entry and entry[:2] == [stat.st_mtime_ns, stat.st_size]:
            commands = entry[2]
        else:
            text = path.read_text(encoding="utf-8", errors="replace")
            commands = stated_commands(text, path.suffix)
        lines[where] = [stat.st_mtime_ns, stat.st_size, commands]
        for command in commands:
            count += 1
            version = command.split()[2].removeprefix("effpt==")
            if version not in served:
                have = ", ".join(sorted(served)) or "nothing"
                problems.append(f"{where}: effpt=={version}, but the site serves {have}")
            elif command != install_command(version):
                problems.append(f"{where}: {command!r} does not use --find-links {url}")
    if cache is not None and lines != known:
        cache.parent.mkdir(parents=True, exist_ok=True)
        data = {"code": _sha(Path(__file__)), "files": lines}
        cache.write_text(json.dumps(data), encoding="utf-8")
    if problems:
        from sphinx.errors import ExtensionError  # noqa: PLC0415  (see the imports above)

        listed = "\n  ".join(problems)
        msg = f"install lines the site cannot satisfy:\n  {listed}"
        raise ExtensionError(msg)
    return count


def publish(app, exception) -> None:
    """build-finished: serve this effpt from the English site, then check every line."""
    from sphinx.util import logging  # noqa: PLC0415  (see the imports above)

    logger = logging.getLogger(__name__)
    if exception is not None or app.builder.format != "html":
        return
    site = Path(app.outdir)
    lines = Path(app.doctreedir) / "effpt-install-lines.json"
    if (app.config.language or "en") != "en":
        # One folder, at the English site's root, serves every language (nox -s docs
        # builds a translation into a folder of the English site).
        served = served_versions(site.parent / FOLDER)
        count = check_install_lines(site, served, lines)
        logger.info("effpt: %d install lines use the served %s", count, ", ".join(served))
        return
    record = Path(app.doctreedir) / "effpt-packages.json"
    built = write_packages(Path(app.srcdir).parent, site / FOLDER, record)
    count = check_install_lines(site, cache=lines)
    logger.info(
        "effpt: the site serves %s; %d install lines use it",
        ", ".join(p.name for p in built),
        count,
    )


def setup(app) -> None:
    app.connect("build-finished", publish)
