"""Chart idioms the pages share: one colour per corpus, and legend-click highlighting.

    pick = legend_pick()                      a selection bound to the legend of `field`
    color = corpus_color(order)               the same colour for a corpus on every chart of a page
    mark.encode(color=color, opacity=highlight(pick)).add_params(pick)

Attach the selection to the layer that encodes the legend's field (colour), or clicking the legend does
nothing.

    forest_chart(design_effect.forest_frame(...))   R(16K) row by row with its 95% interval (page 04's headline)
"""

from __future__ import annotations

import altair as alt

from docgrad.core.constants import CORPORA, HEADLINE_WINDOW


def corpus_color(order=CORPORA, title: str = "corpus", shown=None) -> alt.Color:
    """Colour by corpus with a fixed domain (the requested corpora), whatever cells are present; `shown` limits
    the legend to those corpora and keeps every corpus's colour (the same colour on every page)."""
    legend = alt.Legend(values=list(shown)) if shown is not None else alt.Undefined
    return alt.Color("corpus:N", sort=list(order), title=title, scale=alt.Scale(domain=list(order)), legend=legend)


def legend_pick(field: str = "corpus"):
    """A point selection toggled by clicking `field`'s legend entries (shift-click for several)."""
    return alt.selection_point(fields=[field], bind="legend")


def highlight(pick, on: float = 1.0, off: float = 0.12):
    """Opacity `on` for the selected legend entries (all when nothing is selected), `off` for the rest."""
    return alt.condition(pick, alt.value(on), alt.value(off))


FOREST_KINDS = ["ours", "by source", "published"]


def forest_chart(frame, order=CORPORA, title: str | None = None):
    """A forest plot of design_effect.forest_frame: one row per (corpus, model/design), its point and 95% interval
    (none where the frame gives none: its `note` says why, in the row's label and the tooltip), one panel per
    corpus in `order`, and the line R = 1 (a block worth as many independent chunks as it holds) for reference.
    The x axis and the default title say R(16K) when every row is read at 16K, else R at each row's headline
    window W (a corpus of one's own with shorter spans)."""
    df = frame.assign(label=[f"{r} ({n})" if n else r for r, n in zip(frame["row"], frame["note"])])
    y = alt.Y("label:N", title=None, sort=list(dict.fromkeys(df["label"])), axis=alt.Axis(labelLimit=360))
    at_16k = set(df["W"]) <= {HEADLINE_WINDOW}
    x_title = "R(16K)" if at_16k else "R(W), W the headline window of each row"
    title = title or ("R(16K)" if at_16k else "R at each row's headline window") + \
        " per corpus, model and design, with 95% intervals"
    x = alt.X("R:Q", title=x_title, scale=alt.Scale(zero=False))
    kind = alt.Shape("kind:N", title=None, sort=FOREST_KINDS, scale=alt.Scale(domain=FOREST_KINDS))
    tip = ["corpus:N", "row:N", "W:Q", alt.Tooltip("R:Q", format=".3f"),
           alt.Tooltip("lo:Q", format=".3f", title="95% lo"), alt.Tooltip("hi:Q", format=".3f", title="95% hi"),
           "note:N"]
    base = alt.Chart(df)
    panel = alt.layer(
        base.mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.datum(1)),
        base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q"), x2="hi:Q", y=y, color=corpus_color(order)),
        base.mark_point(filled=True, size=70).encode(x=x, y=y, shape=kind, color=corpus_color(order), tooltip=tip),
    ).properties(width=420, height=alt.Step(16))
    header = alt.Header(labelAngle=0, labelAlign="left")
    subtitle = "dashed: R = 1, no correlation between a document's chunks; a point without a bar has no 95% interval"
    return panel.facet(row=alt.Row("corpus:N", title=None, sort=list(order), header=header),
                       title=alt.Title(title, subtitle=subtitle)).resolve_scale(y="independent")
