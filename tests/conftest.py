"""Make the site's own Sphinx extension (docs/_ext/effpt_site) importable by the tests."""

from __future__ import annotations

import sys
from pathlib import Path

EXT = Path(__file__).resolve().parent.parent / "docs" / "_ext"
if str(EXT) not in sys.path:
    sys.path.insert(0, str(EXT))
