"""Make the site's own Sphinx extension (docs/_ext/effpt_site) importable by the tests.

tests/reader holds the reader's test, which needs an environment built from effpt's
wheel (``nox -s reader`` makes it and names its interpreter in EFFPT_READER_PYTHON);
other sessions do not collect it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

collect_ignore = [] if os.environ.get("EFFPT_READER_PYTHON") else ["reader"]

EXT = Path(__file__).resolve().parent.parent / "docs" / "_ext"
if str(EXT) not in sys.path:
    sys.path.insert(0, str(EXT))
