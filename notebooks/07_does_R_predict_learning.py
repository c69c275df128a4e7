# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Does R predict learning?
#
# Every other page measures gradient noise at fixed weights. This one asks whether the design effect changes how
# a model *learns*. $R(W)$ says that a batch of $b$ consecutive $C$-token chunks of one document has the gradient
# noise of $b/R(bC)$ independent chunks. Where noise sets the pace, the steps to a loss follow
# $S(b) = S_\mathrm{min}(1 + b_\mathrm{noise}/b)$ ([McCandlish et al. 2018](#References)), so a contiguous batch of
# $b$ chunks should train like a shuffled batch of $b/R$ chunks. A small model is trained from scratch on the
# project's corpora with shuffled batches of 2 to 32 chunks and contiguous batches of 32 (one 4,096-token block
# of one document), and $R$ of the same model is measured by the project's probe on its checkpoints. The rule
# that decides it was committed before any run:
# [docs/methods.md](../docs/methods.md#does-r-predict-learning-the-training-test).

# %% tags=["parameters"]
learning_dir = "data/learning"  # run records and R_<CORPUS>.json (`make learning`, `docgrad learning --probe`)
corpora = ["CODE", "WEB"]  # corpora of the test, in this order (WEB is the control)
figures_dir = "figures"  # where figures and the numbers file are written

# %%
from docgrad import page as dg

ROOT = dg.setup()

import altair as alt
import pandas as pd
from IPython.display import Markdown, display

test = dg.learning_runs.read_page(ROOT / learning_dir, corpora)

# %% tags=["hide-input"]
box = dg.learning.result_box(test)
answers = [dg.learning.corpus_answer(c, r) for c, r in test["readings"].items()] if test["complete"] else []
display(Markdown(box + "\n\n" + "\n\n".join(answers)))

# %% [markdown]
# ## Held-out loss against tokens
#
# Every run's loss on documents 40-47, which no run trains on, at each evaluation after the first, against the
# tokens it has seen (steps × chunks a step × 128, on a log scale). Every run makes the same number of steps, so
# arms with more chunks a step see more tokens; the contiguous and shuffled $b = 32$ arms see the same tokens.

# %% tags=["hide-input"]
curves = pd.DataFrame(dg.learning.loss_rows(test["runs"]))
if len(curves):
    arms = dg.learning.arm_order(curves.to_dict("records"))
    chart = alt.Chart(curves[curves.step > 0]).mark_line(opacity=0.7).encode(
        x=alt.X("tokens:Q", title="tokens seen", scale=alt.Scale(type="log", nice=False)),
        y=alt.Y("held_out:Q", title="held-out loss", scale=alt.Scale(zero=False)),
        color=alt.Color("arm:N", title="arm", sort=arms), detail="seed:N",
        tooltip=["corpus", "arm", "seed", "step", "held_out"]).properties(width=300, height=200).facet(
        column=alt.Column("corpus:N", title=None))
    display(dg.save_chart(chart.properties(title="Held-out loss of every run"), "07_loss_curves", figures_dir))
else:
    display(Markdown("*No run is committed yet: `make learning` trains them (about 6 hours on 2 cores).*"))

# %% [markdown]
# ## Steps to the target loss against the batch
#
# $L^*$ is the shuffled $b = 2$ arm's held-out loss halfway through its runs. Each run's steps to $L^*$ (points)
# and the curve $S_\mathrm{min}(1 + b_\mathrm{noise}/b)$ fitted to the shuffled runs; at $b = 32$ the contiguous
# runs beside the shuffled ones.

# %% tags=["hide-input"]
ladder = pd.DataFrame(dg.learning.ladder_rows(test))
if len(ladder):
    base = alt.Chart().encode(x=alt.X("b:Q", title="chunks a step (b)", scale=alt.Scale(type="log", base=2)))
    chart = alt.layer(
        base.transform_filter(alt.datum.kind == "fit").mark_line(color="gray").encode(
            y=alt.Y("steps:Q", title="steps to L*")),
        base.transform_filter(alt.datum.kind != "fit").mark_point(filled=True, size=50, opacity=0.8).encode(
            y="steps:Q", color=alt.Color("kind:N", title="runs"), shape=alt.Shape("kind:N", title="runs")),
        data=ladder).properties(width=300, height=220).facet(column=alt.Column("corpus:N", title=None))
    display(dg.save_chart(chart.properties(title="Steps to L*: the shuffled ladder, its fit and the contiguous "
                                                 "runs"), "07_steps_to_target", figures_dir))
else:
    display(Markdown("*Nothing to fit until every run and R is committed.*"))

# %% [markdown]
# ## Predicted against measured
#
# Left, steps to $L^*$: the contiguous runs' mean (95% $t$ interval over seeds) beside the prediction with the
# trained model's $R$ ($S_R$) and with no design effect ($S_1$, $R = 1$), at the level the decision reads them.
# Right, the same read as a batch: the shuffled batch $b_\mathrm{eff}$ that reaches $L^*$ in the contiguous
# steps on the fitted curve, beside $b/R$ (95% intervals).

# %% tags=["hide-input"]
versus = pd.DataFrame(dg.learning.prediction_rows(test))
if len(versus):
    def interval_chart(quantity, title):
        base = alt.Chart(versus[versus.quantity == quantity]).encode(
            y=alt.Y("what:N", title=None, sort=None), color=alt.Color("what:N", legend=None))
        return (base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title=title, scale=alt.Scale(zero=False)),
                                                     x2="hi:Q")
                + base.mark_point(filled=True, size=60).encode(x="value:Q", tooltip=["corpus", "what", "value",
                                                                                      "lo", "hi"])
                ).properties(width=220, height=90).facet(row=alt.Row("corpus:N", title=None))
    chart = alt.hconcat(interval_chart("steps to L*", "steps to L*"),
                        interval_chart("shuffled chunks", "shuffled chunks a contiguous batch is worth"))
    display(dg.save_chart(chart.properties(title="Predicted against measured"), "07_predicted_vs_measured",
                          figures_dir))
else:
    display(Markdown("*Nothing is predicted until every run and R is committed.*"))

# %% [markdown]
# ## R of the trained model through training
#
# $R(4096)$ at $C = 128$ of the shuffled $b = 32$ run of seed 0 at steps $T/10$, $T/2$ and $T$, probed on
# training documents 0-15, with 95% document intervals; the $R$ that enters the prediction is their mean at every
# paired draw.

# %% tags=["hide-input"]
R_through = pd.DataFrame(dg.learning.R_rows(test["R"]))
if len(R_through):
    base = alt.Chart(R_through).encode(x=alt.X("step:Q", title="training step"),
                                       color=dg.corpus_color(shown=corpora))
    chart = base.mark_rule().encode(y=alt.Y("lo:Q", title="R(4096)"), y2="hi:Q") + base.mark_line(point=True).encode(
        y="R:Q", tooltip=["corpus", "step", "R", "lo", "hi", "B_simple_tokens"])
    display(dg.save_chart(chart.properties(title="R(4096) of the trained model's checkpoints", width=300,
                                           height=200), "07_R_through_training", figures_dir),
            R_through.round(3))
else:
    display(Markdown("*No checkpoint is probed yet: `make learning-probe` after the runs.*"))

# %% [markdown]
# ## The decision through its parts
#
# Described, not decided: $b_\mathrm{eff}$ as its numerator (the fit's $S_\mathrm{min} b_\mathrm{noise}$) over the
# contiguous runs' steps beyond $S_\mathrm{min}$, and what the same curve makes of the shuffled $b = 32$ runs (the
# fit's own check); each seed's steps; the $b/R$ each probed checkpoint gives alone, beside the rule's mean over
# them; and where the contiguous runs' held-out loss at the last step falls on the shuffled ladder.

# %% tags=["hide-input"]
described = dg.learning.described_lines(test)
display(Markdown("\n\n".join(described) if described else "*Nothing is described until every run and R is "
                 "committed.*"))

# %% [markdown]
# ## What it means, and what it does not
#
# A 4-layer model of width 128 trained on CPU, 128-token chunks run alone, blocks of 4,096 tokens, one learning
# rate for every batch size. If the contiguous batches train like $b/R$ shuffled chunks, the design effect this
# report measures at fixed weights is the one that costs steps: a sequence of one document is worth fewer
# independent chunks in training too, and mixing documents in a batch buys steps. If they train like their
# shuffled batch, fixed-weight noise does not carry over to this model's training. Either way it tests the
# mechanism at small scale; long-context training at scale has causal context, larger models and tuned learning
# rates, which this test does not have.

# %%
numbers = {"learning_dir": learning_dir, "corpora": corpora, "complete": test["complete"], "T": test["T"],
           "present": test["present"], "expected": test["expected"], "result_box": box, "answers": answers,
           "described": described, "readings": test["readings"], "R": {c: {k: v for k, v in r.items() if k != "draws"}
                                               for c, r in test["R"].items()},
           "steps": test["steps"]}
_ = dg.save_numbers("07_does_R_predict_learning", numbers, figures_dir)

# %% [markdown]
# ## References
#
# - McCandlish, S., Kaplan, J., Amodei, D., & OpenAI Dota Team (2018). An empirical model of large-batch training.
#   arXiv:1812.06162.
# - Kish, L. (1965). *Survey Sampling*. New York: Wiley. (The design effect.)
# - Holm, S. (1979). A simple sequentially rejective multiple test procedure. *Scandinavian Journal of Statistics*
#   6(2), 65-70.

# %%
dg.versions()
