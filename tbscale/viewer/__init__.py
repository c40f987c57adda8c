"""`tbscale view RUN`: a static trajectory viewer for a run folder.

The viewer is plain HTML, CSS and JavaScript (`assets/`) plus data written as script files, so it
opens from the file system (file://) with no server: `RUN/view/index.js` holds the trial index
(columnar), and `RUN/view/trials/<trial_key>.js` one trial each, loaded on demand. See
docs/viewer.md for the files, the URL hash routes and the data format.

This package imports nothing heavy (no pandas, litellm or docker), so that building stays fast:
`build.py` reads the run through tbscale's typed readers (`runfiles`, the record types), and this
module, which links to the viewer from reports, imports nothing of tbscale at all.
"""

from __future__ import annotations

import re
from urllib.parse import quote

_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

__all__ = ["trial_href", "index_href", "trial_file_stem"]


def trial_file_stem(trial_key: str) -> str:
    """The file name (without `.js`) of a trial's data under `view/trials/`. viewer.js computes
    the same name: every character outside [A-Za-z0-9_-] becomes `_`."""
    key = str(trial_key)
    return key if _SAFE.fullmatch(key) else (_UNSAFE.sub("_", key) or "_")


def trial_href(trial_key: str, *, base: str = "../view/index.html") -> str:
    """Relative link to a trial's page in the viewer, from RUN/report/report.html (the default
    `base`); pass `base="index.html"` for a link from inside RUN/view/."""
    return f"{base}#/trial/{quote(str(trial_key), safe='')}"


def index_href(*, base: str = "../view/index.html", **filters: str) -> str:
    """Relative link to the viewer's trial index with filters in the hash, e.g.
    `index_href(setting="turn_bon_n4", ending="pass")`."""
    query = "&".join(f"{quote(k, safe='')}={quote(str(v), safe=',')}" for k, v in filters.items() if v is not None)
    return f"{base}#/" + (f"?{query}" if query else "")
