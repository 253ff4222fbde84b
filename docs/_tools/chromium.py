"""The browser and the local server that the site's checks share.

:func:`chromium_flags` is the one list of flags every headless Chromium here starts with
(Debian's ``chromium``; tools that download their own browser fail here).
:func:`webdriver` starts it under Debian's ``chromedriver`` for Selenium, with the
console and network logs on and whatever Chromium logged at start-up dropped.
:func:`serve` serves a built site on a free local port, plainly or as GitHub Pages does.
:func:`report_failures` ends a check: each failing page with its problems, and the exit
status. The browser test, Lighthouse and the offline archive's check all start from here.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import re
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: What GitHub Pages compresses: text, markup, scripts, styles, fonts that are not already.
COMPRESSIBLE = re.compile(r"^(text/|application/(javascript|json|xml|x-javascript)|image/svg)")
CACHE_SECONDS = 600  # GitHub Pages sends Cache-Control: max-age=600


def report_failures(failures: Mapping[str, Iterable[str]], why: str = "") -> int:
    """Print each failing page (``why`` after its name) and its problems; return the exit
    status: 1 when anything failed, else 0.

    Examples
    --------
    >>> report_failures({"index.html": ["no title", "2 broken links"]}, " fails")
    <BLANKLINE>
    index.html fails:
      - no title
      - 2 broken links
    1
    >>> report_failures({})
    0
    """
    for page, problems in failures.items():
        print(f"\n{page}{why}:")
        for problem in problems:
            print(f"  - {problem}")
    return 1 if failures else 0


def chromium_flags(*extra: str) -> list[str]:
    """Headless, sandbox-free (a container has no user namespaces), and quiet on the network.

    >>> chromium_flags("--window-size=1280,900")[-1]
    '--window-size=1280,900'
    >>> "--disable-background-networking" in chromium_flags()
    True
    """
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        *extra,
    ]


def webdriver(profile: Path | str, *extra: str):
    """Debian's chromium under Selenium, with browser and network logs, in a fresh profile.

    Whatever Chromium's own start-up page logged is read and dropped, so the first log a
    caller reads is about the first page it opened.
    """
    from selenium import webdriver as selenium  # noqa: PLC0415  (the browser group only)
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    options = selenium.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in chromium_flags("--window-size=1280,900", *extra):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = selenium.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.get("about:blank")
    time.sleep(0.5)
    driver.get_log("performance")
    driver.get_log("browser")
    return driver


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: ARG002  (http.server's signature)
        return


def public_base(site: Path) -> str | None:
    """The site's public base URL, read from the landing page's canonical link."""
    html = (site / "index.html").read_text(encoding="utf-8")
    match = re.search(r'<link rel="canonical" href="([^"]+)"', html)
    if not match:
        return None
    return match.group(1).rsplit("/", 1)[0] + "/"


class GzipHandler(_QuietHandler):
    """Serve files as GitHub Pages does: gzip for text types, a ten-minute cache lifetime."""

    site: Path
    rewrite: tuple[str, str] | None = None
    cache: dict[tuple[str, bool], bytes] = {}  # noqa: RUF012  (shared by design)
    lock = threading.Lock()

    def do_GET(self):
        path = self.site / unquote(urlparse(self.path).path).lstrip("/")
        if path.is_dir():
            if not self.path.split("?")[0].endswith("/"):
                self.send_response(301)
                self.send_header("Location", self.path.split("?")[0] + "/")
                self.end_headers()
                return
            path /= "index.html"
        if not path.resolve().is_relative_to(self.site.resolve()) or not path.is_file():
            self.send_error(404)
            return
        ctype = self.guess_type(str(path))
        gz = "gzip" in self.headers.get("Accept-Encoding", "") and bool(COMPRESSIBLE.match(ctype))
        key = (str(path), gz)
        with self.lock:
            body = self.cache.get(key)
        if body is None:
            body = path.read_bytes()
            if self.rewrite and path.suffix in {".html", ".xml"}:
                body = body.replace(*(s.encode() for s in self.rewrite))
            if gz:
                body = gzip.compress(body, compresslevel=6, mtime=0)
            with self.lock:
                self.cache[key] = body
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        if gz:
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", f"max-age={CACHE_SECONDS}")
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            return  # Lighthouse closes connections it no longer needs: not an error


def serve(
    site: Path, *, as_github_pages: bool = False
) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve ``site`` on a free local port in a daemon thread; return the server and its base URL.

    Plainly by default; ``as_github_pages`` adds what GitHub Pages does (:class:`GzipHandler`)
    and answers for the site's public address. The base URL ends with ``/``.
    """
    if not as_github_pages:
        handler = functools.partial(_QuietHandler, directory=str(site))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}/"
    handler = type("Handler", (GzipHandler,), {"site": site, "cache": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    public = public_base(site)
    if public:
        handler.rewrite = (public, base)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, base
