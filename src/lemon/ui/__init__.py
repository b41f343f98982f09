"""The web view of runs, evaluations and training (``lemon ui``; also served by ``lemon serve``).

:mod:`lemon.ui.runs`, :mod:`lemon.ui.evaluations` and :mod:`lemon.ui.trainings` turn what
LEMON writes (trace events, eval run folders, training metrics and credit records) into the
pages' data, as pure functions; :mod:`lemon.ui.files` finds those files (``lemon ui``),
:mod:`lemon.ui.sources` is the interface a source of runs implements (the files, or the
orchestration service's runs), and :mod:`lemon.ui.app` is the WSGI application serving the
pages (static HTML, CSS and JavaScript in ``static/``: no library, no CDN, no network).
"""

from __future__ import annotations

__all__: list[str] = []
