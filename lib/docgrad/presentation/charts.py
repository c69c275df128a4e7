"""Chart idioms the pages share: one colour per corpus, and legend-click highlighting.

    pick = legend_pick()                      a selection bound to the legend of `field`
    color = corpus_color(order)               the same colour for a corpus on every chart of a page
    mark.encode(color=color, opacity=highlight(pick)).add_params(pick)

Attach the selection to the layer that encodes the legend's field (colour), or clicking the legend does
nothing.
"""

from __future__ import annotations

import altair as alt

from docgrad.core.constants import CORPORA


def corpus_color(order=CORPORA, title: str = "corpus") -> alt.Color:
    """Colour by corpus with a fixed domain (the requested corpora), whatever cells are present."""
    return alt.Color("corpus:N", sort=list(order), title=title, scale=alt.Scale(domain=list(order)))


def legend_pick(field: str = "corpus"):
    """A point selection toggled by clicking `field`'s legend entries (shift-click for several)."""
    return alt.selection_point(fields=[field], bind="legend")


def highlight(pick, on: float = 1.0, off: float = 0.12):
    """Opacity `on` for the selected legend entries (all when nothing is selected), `off` for the rest."""
    return alt.condition(pick, alt.value(on), alt.value(off))
