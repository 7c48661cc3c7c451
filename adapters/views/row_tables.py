"""The row tables of one generation of the read models, by name: what a rebuild reports it
made and dropped. What they hold, and their SQL, is the backends'."""

from __future__ import annotations

TABLES = ("heads", "entries", "outcomes", "messages", "pages", "turns")
"""The tables the view fold writes, one set per generation (`views_g<N>_<table>`)."""

OVERVIEW_TABLES = ("overview", "overview_marks")
"""The overview read model's tables of a generation (`adapters.views.overview_rows`): not rows
the view fold writes, nor cleared with them; made with a generation's tables since the
overview read model came (an earlier generation has none)."""

USAGE_TABLES = ("usage",)
"""The usage audit's table of a generation (`adapters.views.usage_rows`): one flat row per
segment, written by the view fold, made with a generation's tables since the usage audit came."""
