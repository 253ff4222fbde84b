"""The local server and browser flags the site's checks share (docs/_tools/chromium.py)."""

from __future__ import annotations

import doctest
import gzip
import urllib.error
import urllib.request

import chromium
import pytest
from chromium import serve


@pytest.fixture
def site(tmp_path):
    (tmp_path / "index.html").write_text(
        '<link rel="canonical" href="https://example.org/effpt/index.html">'
        '<a href="https://example.org/effpt/page.html">page</a>',
        encoding="utf-8",
    )
    (tmp_path / "data.bin").write_bytes(b"\x00\x01")
    return tmp_path


def fetch(url: str, **headers: str):
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as response:
        return response.headers, response.read()


def test_doctests_pass():
    assert doctest.testmod(chromium).failed == 0


def test_plain_server_sends_files_as_they_are(site):
    server, base = serve(site)
    try:
        assert base.endswith("/")
        headers, body = fetch(base + "index.html", **{"Accept-Encoding": "gzip"})
        assert headers.get("Content-Encoding") is None
        assert body == (site / "index.html").read_bytes()
    finally:
        server.shutdown()
        server.server_close()


def test_github_pages_server_compresses_text_and_names_itself(site):
    server, base = serve(site, as_github_pages=True)
    try:
        headers, body = fetch(base + "index.html", **{"Accept-Encoding": "gzip"})
        assert headers["Content-Encoding"] == "gzip"
        assert headers["Cache-Control"] == "max-age=600"
        html = gzip.decompress(body).decode()
        assert f'href="{base}page.html"' in html  # the public address became the local one
        headers, body = fetch(base + "data.bin", **{"Accept-Encoding": "gzip"})
        assert headers.get("Content-Encoding") is None
        assert body == b"\x00\x01"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            fetch(base + "../" * 5 + "etc/passwd")
    finally:
        server.shutdown()
        server.server_close()
