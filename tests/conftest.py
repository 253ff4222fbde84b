"""Make the site's own Sphinx extension (docs/_ext/effpt_site) and the page runner
(docs/_tools/page_runner.py) importable by the tests.

tests/reader holds the reader's test, which needs an environment built from effpt's
wheel (``nox -s reader`` makes it and names its interpreter in EFFPT_READER_PYTHON);
other sessions do not collect it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

collect_ignore = [] if os.environ.get("EFFPT_READER_PYTHON") else ["reader"]

DOCS = Path(__file__).resolve().parent.parent / "docs"
# docs/_ext: the site's extension; docs/_tools: the page runner (page_runner.py).
for folder in (DOCS / "_ext", DOCS / "_tools"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
