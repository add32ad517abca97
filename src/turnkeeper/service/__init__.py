"""The service layer: every operation turnkeeper offers, over any `Store`.

`Turnkeeper` (in `facade`) is the one object callers use: it is composed of parts over one
`Core`, each part a module beside it (see `facade` for the map).
"""

from turnkeeper.service.core import MAX_PAGE, SessionRef, default_summarizer, utcnow
from turnkeeper.service.digest import SUMMARY_TOKENS
from turnkeeper.service.facade import Turnkeeper

__all__ = [
    "MAX_PAGE",
    "SUMMARY_TOKENS",
    "SessionRef",
    "Turnkeeper",
    "default_summarizer",
    "utcnow",
]
