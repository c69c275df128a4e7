"""Page 01d's library: TRL's GRPO loss normalisers and reward scaling (docgrad.teaching.rl_losses), checked against
the installed TRL's own `_compute_loss` and source (rl_trl), and the worked batch, worked solutions and the
dapo-normaliser exercise's checker (rl_worked). Everything here runs TRL's code locally, with no model and no
network."""

import re
from pathlib import Path

import pytest
import torch
from docgrad.presentation.evidence import RESULT_BOX_WORDS
from docgrad.teaching import rl_losses as RL
from docgrad.teaching import rl_trl as RLT
from docgrad.teaching import rl_worked as RLW

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "notebooks" / "01d_rl_normalisation.py"


def _mask(rows, width):
    """rows: a length (right padding) or an explicit 0/1 list."""
    m = torch.zeros(len(rows), width, dtype=torch.float64)
    for i, r in enumerate(rows):
        if isinstance(r, int):
            m[i, :r] = 1
        else:
            m[i, :len(r)] = torch.tensor(r, dtype=torch.float64)
    return m


# a micro-batch with right padding, a masked span inside a row (tool output) and a row masked out (truncated)
HARD_MASK = _mask([3, [1, 1, 0, 0, 1, 1, 1], 0, 10], 10)
LENGTHS = [3, 6, 9, 14, 4, 8, 12, 16]
REWARDS = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.8]
STEP = dict(max_completion_length=16, rows_per_microbatch=4)


# --- the weights, against TRL's own _compute_loss ---------------------------------------------------------------

@pytest.mark.parametrize("page", [False, True], ids=["defaults", "page settings"])
@pytest.mark.parametrize("loss_type", list(RL.LOSS_TYPES))
@pytest.mark.parametrize("K, P, S, N", [(1, 1, None, None), (2, 1, None, 41.0), (3, 2, None, 97.0), (2, 2, 4, 150.0),
                                        (4, 1, 2, 33.0)])
def test_library_weights_times_c_equal_the_installed_trl_compute_loss(loss_type, page, K, P, S, N):
    kw = dict(max_completion_length=12, accumulation_steps=K, num_processes=P, steps_per_generation=S,
              num_items_in_batch=N if N is not None else float(HARD_MASK.sum()))
    settings = RL.settings_for(loss_type, page)
    ours = RL.microbatch_weights(HARD_MASK, loss_type, **kw) * RL.gradient_factor(loss_type, settings)
    trl = RLT.trl_microbatch_weights(HARD_MASK, loss_type, settings=settings, **kw)
    assert torch.allclose(ours, trl, rtol=1e-6, atol=1e-9), (loss_type, ours, trl)
    assert float(ours[2].abs().sum()) == 0 and float(ours[1, 2:4].abs().sum()) == 0     # masked tokens weigh 0


def test_cispo_at_trls_defaults_weighs_epsilon_over_n_not_one_over_n():
    """epsilon_high is None by default and the trainer falls back to epsilon = 0.2: every weight is 0.2/N."""
    N = float(HARD_MASK.sum())
    kw = dict(num_items_in_batch=N)
    default = RLT.trl_microbatch_weights(HARD_MASK, "cispo", **kw)
    assert RL.gradient_factor("cispo") == pytest.approx(0.2) == RL.TRL_DEFAULTS["epsilon"]
    assert torch.allclose(default, 0.2 * HARD_MASK / N, rtol=1e-6)
    assert torch.allclose(RLT.trl_microbatch_weights(HARD_MASK, "cispo", settings=RL.settings_for("cispo", True), **kw),
                          HARD_MASK / N, rtol=1e-6)
    assert RL.gradient_factor("cispo", {**RL.TRL_DEFAULTS, "epsilon_high": 0.5}) == 0.5


def test_the_trl_run_would_catch_a_wrong_normaliser():
    """The comparison above can fail: bnpo's local count is not dapo's global one on the same micro-batch."""
    kw = dict(max_completion_length=12, accumulation_steps=2, num_items_in_batch=60.0)
    assert not torch.allclose(RL.microbatch_weights(HARD_MASK, "bnpo", **kw),
                              RLT.trl_microbatch_weights(HARD_MASK, "dapo", **kw))


def test_the_stub_refuses_settings_that_need_a_model():
    with pytest.raises(RL.RLLossError, match="no KL term"):
        RLT.trl_compute_loss(HARD_MASK, "dapo", settings={"beta": 0.04}, num_items_in_batch=20.0)


def test_microbatch_loss_is_the_weighted_sum_of_token_losses():
    l = torch.arange(40, dtype=torch.float64).reshape(4, 10) / 10
    got = RL.microbatch_loss(l, HARD_MASK, "grpo")
    rows = [(l[i] * HARD_MASK[i]).sum() / max(float(HARD_MASK[i].sum()), 1.0) for i in range(4)]
    assert float(got) == pytest.approx(float(sum(rows) / 4))
    with pytest.raises(RL.RLLossError, match="per_token_loss has shape"):
        RL.microbatch_loss(l[:, :5], HARD_MASK, "grpo")


# --- TRL's loss on the worked batch: the page's table ---------------------------------------------------------

@pytest.fixture(scope="module")
def table():
    adv = RL.advantages(REWARDS, 4, "group")
    return {r["loss_type"]: r for r in RLT.trl_loss_table(LENGTHS, adv, log_prob=-1.0, **STEP)}


def test_trls_loss_at_ratio_one_is_the_library_prediction_for_every_loss_type(table):
    for name, r in table.items():
        assert r["loss_defaults"] == pytest.approx(r["predicted_defaults"], abs=1e-6), name
        assert r["loss_page"] == pytest.approx(r["predicted_page"], abs=1e-6), name
        assert r["max_push_diff"] < 1e-7, name


def test_trls_loss_is_not_minus_sum_a_w_for_sapo_cispo_and_vespo(table):
    """The numbers the issue found by running TRL: sapo −0.036 (its gate 2/τ at ratio 1), cispo and vespo −c·A·log π
    (−0.305 at log π = −1 with c = 1; cispo's default c = 0.2 gives −0.0611)."""
    adv = RL.advantages(REWARDS, 4, "group")
    minus_sum_aw = -float((adv * torch.tensor(LENGTHS, dtype=torch.float64)).sum()) / 72
    assert table["dapo"]["loss_defaults"] == pytest.approx(minus_sum_aw, rel=1e-5)
    assert table["grpo"]["loss_defaults"] == 0.0
    assert table["sapo"]["loss_defaults"] == pytest.approx(-0.0357, abs=5e-5)
    assert table["cispo"]["loss_page"] == pytest.approx(-minus_sum_aw, rel=1e-5)
    assert table["cispo"]["loss_defaults"] == pytest.approx(-0.2 * minus_sum_aw, rel=1e-5)
    assert table["vespo"]["loss_defaults"] == pytest.approx(-minus_sum_aw, rel=1e-5)
    assert table["cispo"]["page"] == "epsilon_high=5.0" and table["cispo"]["defaults"] == "defaults"
    assert table["luspo"]["page"] == "importance_sampling_level='sequence'"


def test_push_size_is_the_learning_rate_factor(table):
    """dr_grpo's gradient is mean length / L of dapo's, luspo's N / H, cispo's at the defaults 0.2."""
    mean_length = sum(LENGTHS) / len(LENGTHS)
    assert table["dapo"]["size_defaults"] == 1.0
    assert table["dr_grpo"]["size_defaults"] == pytest.approx(mean_length / 16, rel=1e-6)
    assert table["luspo"]["size_defaults"] == pytest.approx(mean_length, rel=1e-6)
    assert table["cispo"]["size_defaults"] == pytest.approx(0.2, rel=1e-6)
    assert table["cispo"]["size_page"] == pytest.approx(1.0, rel=1e-6)


def test_the_answer_box_names_the_version_and_the_cispo_default(table):
    box = RLT.answer_box(list(table.values()))
    assert box.startswith(f"> **What to take away.** TRL {RLT.trl_version()}, its `_compute_loss` run")
    assert len(box.replace(">", " ").split()) <= RESULT_BOX_WORDS
    assert "`cispo` at the defaults weighs 0.2/N" in box and "`epsilon` = 0.2; set it to 5" in box
    assert "0.562, 9 × dapo's" in box.replace("0.563", "0.562")
    assert "cispo, vespo = 1/N" not in box


# --- the step weights: the answer table's column -------------------------------------------------------------

def test_step_weights_are_the_answer_table_formulas():
    L, B = 16, 4
    mask = RL.completion_mask(LENGTHS, L)
    masks = RL.split_step(mask, B, 1)
    R, N, K, P = len(LENGTHS), sum(LENGTHS), 2, 1
    w = {lt: RL.flat_step_weights(masks, lt, max_completion_length=L) for lt in RL.LOSS_TYPES}
    n = torch.tensor(LENGTHS, dtype=torch.float64)
    for lt in ("grpo", "sapo"):
        assert torch.allclose(w[lt][:, 0], 1 / (R * n))
        assert torch.allclose(w[lt].sum(1), torch.full((R,), 1 / R, dtype=torch.float64))   # equal completion totals
    n_mb = torch.tensor([sum(LENGTHS[:4])] * 4 + [sum(LENGTHS[4:])] * 4, dtype=torch.float64)
    assert torch.allclose(w["bnpo"][:, 0], 1 / (P * K * n_mb))
    assert torch.allclose(w["dr_grpo"], mask / (R * L))
    for lt in ("dapo", "cispo", "vespo"):
        assert torch.allclose(w[lt], mask / N) and float(w[lt].sum()) == pytest.approx(1.0)
    assert torch.allclose(w["luspo"], mask / R)


def test_processes_and_accumulation_steps_cut_a_step_the_same_way():
    mask = RL.completion_mask(LENGTHS, 16)
    for lt in RL.LOSS_TYPES:
        one = RL.flat_step_weights(RL.split_step(mask, 2, 1), lt, max_completion_length=16)
        four = RL.flat_step_weights(RL.split_step(mask, 2, 4), lt, max_completion_length=16)
        two = RL.flat_step_weights(RL.split_step(mask, 2, 2), lt, max_completion_length=16)
        assert torch.allclose(one, four) and torch.allclose(one, two), lt


def test_bnpo_is_grpo_at_one_row_per_microbatch_and_dapo_at_one_microbatch():
    rows = {r["rows_per_microbatch"]: r for r in RLW.bnpo_by_microbatch_size(LENGTHS, 16, [8, 4, 1])}
    assert rows[1]["equals_grpo"] and not rows[1]["equals_dapo"]
    assert rows[8]["equals_dapo"] and not rows[8]["equals_grpo"]
    assert not rows[4]["equals_grpo"] and not rows[4]["equals_dapo"]
    assert rows[4]["bnpo"] == pytest.approx([72 / (2 * 32)] * 4 + [72 / (2 * 40)] * 4)


def test_dapo_when_a_generation_batch_spans_steps_and_when_a_step_spans_generation_batches():
    spans = RLW.generation_batches(LENGTHS, 16, 4, 2, 1)                     # S = 2 > K = 1: two steps
    assert [s["tokens"] for s in spans] == [32, 40] and [s["step"] for s in spans] == [1, 2]
    assert all(s["weight"] == pytest.approx(2 / 72) and s["N"] == 72 for s in spans)
    assert [s["over_step_token_mean"] for s in spans] == pytest.approx([32 * 2 / 72, 40 * 2 / 72])
    within = RLW.generation_batches(LENGTHS, 16, 4, 1, 2)                    # S = 1 < K = 2: one step
    assert [s["N"] for s in within] == [32, 40] and [s["step"] for s in within] == [1, 1]
    assert [s["weight"] for s in within] == pytest.approx([1 / 64, 1 / 80])
    assert RLW.generation_batches(LENGTHS, 16, 4, 2, 2)[0]["over_step_token_mean"] == pytest.approx(1.0)
    with pytest.raises(RL.RLLossError, match="pass its num_items_in_batch"):
        RL.step_weights(RL.split_step(RL.completion_mask(LENGTHS, 16), 4, 1), "dapo", steps_per_generation=4)


def test_family_table_length_bias_and_scope_of_the_worked_batch():
    adv = RL.advantages(REWARDS, 4, "group")
    rows = {r["family"]: r for r in RLW.family_table(LENGTHS, adv, **STEP)}
    assert {f: r["depends_on_other_lengths"] for f, r in rows.items()} == {
        "sequence_mean": False, "local_token_mean": True, "constant": False, "global_token_mean": True,
        "sequence_sum": False}
    assert rows["sequence_mean"]["short_over_long_per_token"] == pytest.approx(16 / 3)
    assert all(rows[f]["short_over_long_per_token"] == pytest.approx(1.0)
               for f in ("constant", "global_token_mean", "sequence_sum"))
    assert rows["global_token_mean"]["total_x_H"] == pytest.approx([8 * n / 72 for n in LENGTHS])


def test_the_figures_totals_are_flat_for_grpo_and_proportional_to_length_for_dapo():
    rows = RLW.completion_totals(LENGTHS, **STEP)
    by = {lt: [r["total_x_H"] for r in rows if r["loss_type"] == lt] for lt in RL.LOSS_TYPES}
    assert by["grpo"] == pytest.approx([1.0] * 8) and by["sapo"] == by["grpo"]
    assert by["dapo"] == pytest.approx([8 * n / 72 for n in LENGTHS])
    assert by["cispo"] == pytest.approx([0.2 * v for v in by["dapo"]])                  # TRL's defaults
    assert [r["total_x_H"] for r in RLW.completion_totals(LENGTHS, page_settings=True, **STEP)
            if r["loss_type"] == "cispo"] == pytest.approx(by["dapo"])
    assert by["luspo"] == pytest.approx([float(n) for n in LENGTHS])


# --- advantages: scale_rewards ----------------------------------------------------------------------------------

def _trl_advantages(rewards, k, scale):
    """The installed lines, run with TRL's own nanstd (one reward function, sum_then_normalize)."""
    from trl.trainer.utils import nanstd

    r = torch.tensor(rewards, dtype=torch.float64)
    mean = torch.nanmean(r.view(-1, k), dim=1).repeat_interleave(k, dim=0)
    std = (nanstd(r.view(-1, k), dim=1).repeat_interleave(k, dim=0) if scale in ("group", "none")
           else nanstd(r).expand_as(r))
    a = r - mean
    return a / (std + 1e-4) if scale != "none" else a


@pytest.mark.parametrize("scale", RL.SCALE_REWARDS)
def test_advantages_equal_trls_lines_with_its_nanstd(scale):
    # rtol 1e-6: nanstd's Bessel factor count / (count - 1) is a float32 division (TRL's rewards are float32 too)
    assert torch.allclose(RL.advantages(REWARDS, 4, scale), _trl_advantages(REWARDS, 4, scale), rtol=1e-6, atol=0)


def test_group_scaling_enlarges_the_small_gaps_of_a_low_spread_group():
    g, n = RL.advantages(REWARDS, 4, "group"), RL.advantages(REWARDS, 4, "none")
    assert float(g[7] / n[7]) == pytest.approx(1 / (0.1 + 1e-4))                  # group 2: s = 0.1
    assert float(g[0] / n[0]) == pytest.approx(1 / (0.5 + 1e-4))                  # group 1: s = 0.5
    assert torch.allclose(RL.advantages([2.0, 2.0, 1.0, 3.0], 2, "group")[:2], torch.zeros(2, dtype=torch.float64))


def test_the_advantage_lines_mirrored_are_in_the_installed_source():
    lines = [t.strip() for _, t in RLT.trl_excerpts()["advantages"]["lines"]]
    assert [line for line in RL.MIRRORED_ADVANTAGE_LINES if line not in lines] == []


def test_batch_std_is_over_all_processes_and_normalize_then_sum_bypasses_scale_rewards():
    ex = RLT.trl_excerpts()
    assert "gather(rewards_per_func)" in ex["rewards_gathered"]["lines"][0][1]
    body = "\n".join(t for _, t in ex["normalize_then_sum"]["lines"])
    assert "scale_rewards" not in body and "nanstd(rewards)" in body


def test_a_changed_advantage_line_stops_the_page(monkeypatch):
    real = RLT.trl_excerpts()
    changed = dict(real, advantages=dict(real["advantages"], lines=[
        (no, t.replace("+ 1e-4", "+ 1e-6")) for no, t in real["advantages"]["lines"]]))
    monkeypatch.setattr(RLT, "trl_excerpts", lambda: changed)
    with pytest.raises(RL.RLLossError, match="advantage lines changed"):
        RLT.explained_matches_installed()


def test_scale_rewards_true_and_false_map_as_grpo_config_maps_them(tmp_path):
    from trl import GRPOConfig

    for given in (True, False, "batch"):
        cfg = GRPOConfig(output_dir=str(tmp_path), scale_rewards=given, use_cpu=True, bf16=False,
                         per_device_train_batch_size=2, num_generations=2, gradient_accumulation_steps=3,
                         report_to=[])
        assert cfg.scale_rewards == RL.normalise_scale_rewards(given)
    assert cfg.loss_type == RL.DEFAULT_LOSS_TYPE and cfg.steps_per_generation == 3          # S = K by default
    assert cfg.epsilon_high is None and cfg.epsilon == RL.TRL_DEFAULTS["epsilon"]          # cispo's 0.2 factor
    with pytest.raises(RL.RLLossError, match="scale_rewards must be"):
        RL.normalise_scale_rewards("groups")


# --- the installed source: the list the page explains, defaults, papers ---------------------------------------------

def test_the_installed_trl_has_exactly_the_loss_types_defaults_and_papers_explained():
    got = RLT.explained_matches_installed()
    assert sorted(set(got["branches"])) == sorted(RL.LOSS_TYPES) == sorted(set(got["config_help"]))
    assert got["default"] == "dapo" and got["scale_rewards_default"] == "group"
    assert all(RLT.papers_cited().values())
    assert {k: RLT.config_defaults()[k] for k in RL.TRL_DEFAULTS} == RL.TRL_DEFAULTS


def test_a_loss_type_the_page_does_not_explain_stops_it(monkeypatch):
    real = RLT.trl_loss_types()
    monkeypatch.setattr(RLT, "trl_loss_types", lambda: dict(real, branches=real["branches"] + ["gspo_plus"]))
    with pytest.raises(RL.RLLossError, match=r"new \['gspo_plus'\]"):
        RLT.explained_matches_installed()


def test_a_changed_default_stops_the_page(monkeypatch):
    real = RLT.config_defaults()
    monkeypatch.setattr(RLT, "config_defaults", lambda: dict(real, epsilon_high=0.28))
    with pytest.raises(RL.RLLossError, match="epsilon_high"):
        RLT.explained_matches_installed()


def test_excerpts_carry_the_installed_files_line_numbers():
    for name, ex in RLT.trl_excerpts().items():
        text = (RLT.trl_source_path(ex["file"].removeprefix("trl/"))).read_text().splitlines()
        assert ex["lines"] and all(text[no - 1] == t for no, t in ex["lines"]), name
        assert ex["first_line"] == ex["lines"][0][0] and ex["last_line"] == ex["lines"][-1][0]
    ex = RLT.trl_excerpts()
    norm = "\n".join(t for _, t in ex["normalisers"]["lines"])
    assert "num_items_in_batch" in norm and "max_completion_length" in norm
    assert "else args.epsilon" in ex["epsilon_high"]["lines"][-1][1]
    factors = "\n".join(t for _, t in ex["token_factors"]["lines"])
    assert all(w in factors for w in ("off_policy_mask", "entropy_mask", "importance_sampling_ratio", "self.beta"))


def test_a_missing_marker_is_a_clear_error(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("a = 1\nb = 2\n")
    with pytest.raises(RL.RLLossError, match="no line contains 'c = 3'"):
        RLT.source_excerpt(f, "c = 3", "b")
    assert RLT.source_excerpt(f, "a =", "b =")["lines"] == [(1, "a = 1"), (2, "b = 2")]


def test_history_is_dated_by_arxiv_month_and_the_guide_covers_every_option():
    rows = RL.history_rows()
    assert [r["month"] for r in rows] == sorted(r["month"] for r in rows)
    assert rows[0] == {"month": "2024-02", "paper": "DeepSeekMath (GRPO)", "arxiv": "2402.03300",
                       "in TRL": 'loss_type="grpo", scale_rewards="group"'}
    named = " ".join(r["in TRL"] for r in rows)
    assert all(f'loss_type="{n}"' in named for n in RL.LOSS_TYPES if n != "bnpo")
    assert all(f'scale_rewards="{s}"' in named for s in RL.SCALE_REWARDS)
    assert RL.LOSS_TYPES["cispo"].introduced == "MiniMax-M1 (CISPO), 2025-06"
    guide = " ".join(r["setting"] for r in RL.guide_rows())
    assert all(n in guide for n in RL.LOSS_TYPES) and all(s in guide for s in ("batch", "none"))
    assert all(re.search(r"\(20\d\d-\d\d, arXiv \d{4}\.\d{5}\)", r["source"]) for r in RL.guide_rows()
               if r["setting"] != "bnpo")
    assert "importance_sampling_level='sequence' (the page's luspo setting)" in named


# --- the page ---------------------------------------------------------------------------------------------------

def test_the_page_builds_its_box_from_trl_and_uses_k_for_accumulation():
    text = PAGE.read_text()
    assert "RLT.answer_box(trl_table)" in text and "RLT.explained_matches_installed()" in text
    assert "dapo, cispo, vespo = 1/N" not in text and "G accumulation" not in text
    assert "K = `gradient_accumulation_steps`" in text
    # R is the design effect R(W) on every other page: the step's completion count is H here
    assert "H = P·K·B" in text and "R = P·K·B" not in text and "total_x_R" not in text and "1/R each" not in text


def test_the_executed_page_opens_with_its_computed_box():
    """01d's take-away box is computed (its numbers and TRL's version come from rl_trl), so it is the first output
    of the executed page rather than typed in the first cell; it keeps the result box's word limit."""
    import nbformat

    nb = nbformat.read(PAGE.with_suffix(".ipynb"), as_version=4)
    first = next(o["data"]["text/markdown"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "text/markdown" in o.get("data", {}))
    assert first.startswith("> **What to take away.** TRL ") and "0.2/N" in first
    assert len(first.replace(">", " ").split()) <= RESULT_BOX_WORDS


# --- the exercise checker --------------------------------------------------------------------------------------

def correct_plain(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / (num_items_in_batch / num_processes)


def correct_times_p(l, m, n, p):
    return (l * m).sum() * p / n


def correct_boolean_index(l, m, n, p):
    return l[m.bool()].sum() / (n.float() / p)


def correct_trls_form(l, m, n, p):
    return (l * m).sum() / (n.clamp(min=1.0) / p * 2 / 2)


def correct_float64(l, m, n, p):
    return (l.double() * m.double()).sum() / (n.double() / p)


def correct_einsum(l, m, n, p):
    return torch.einsum("bt,bt->", l, m.to(l.dtype)) / torch.div(n, p)


@pytest.mark.parametrize("fix", [correct_plain, correct_times_p, correct_boolean_index, correct_trls_form,
                                 correct_float64, correct_einsum])
def test_the_dapo_checker_passes_correct_solutions_written_differently(fix):
    out = RLW.check_dapo_normaliser(fix)
    assert out["passed"] and out["message"].startswith("correct:"), out["message"]


@pytest.mark.parametrize("bug, scenario, says", [
    (lambda l, m, n, p: (l * m).sum() / m.sum(), 1, "the micro-batch's own token count (TRL's bnpo)"),
    (lambda l, m, n, p: l[m.bool()].mean(), 1, "the micro-batch's own token count (TRL's bnpo)"),
    (lambda l, m, n, p: ((l * m).sum(-1) / m.sum(-1).clamp(min=1)).mean(), 1, "averaged over its own tokens"),
    (lambda l, m, n, p: (l * m).mean(), 1, "every position of the micro-batch, padding included"),
    (lambda l, m, n, p: (l * m).sum() / m.numel(), 1, "every position of the micro-batch, padding included"),
    (lambda l, m, n, p: (l * m).sum(-1).mean(), 1, "(TRL's luspo)"),
    (lambda l, m, n, p: l.sum() / (n / p), 1, "multiply per_token_loss by the mask"),
    (lambda l, m, n, p: (l * m).sum() / n, 2, "each token weighs 1/(N·P)"),
    (lambda l, m, n, p: (l * m).sum() / (n * p), 2, "the denominator is N × P"),
    (lambda l, m, n, p: (l * m).sum() / (n // p), 2, "integer division"),
    (lambda l, m, n, p: torch.div(l.mul(m).sum(), torch.div(n, p, rounding_mode="floor")), 2, "integer division"),
    (lambda l, m, n, p: (l * m).sum(-1) / (n / p), 1, "return one number as a 0-dim tensor"),
    (lambda l, m, n, p: torch.tensor(float((l * m).sum() / (n / p))), 1, "no .item()"),
    (lambda l, m, n, p: 2 * (l * m).sum() / (n / p), 1, "2 × 1/N instead of 1/N: off by a constant factor"),
    (lambda l, m, n, p: l.nope, 1, "raised AttributeError"),
])
def test_the_dapo_checker_fails_a_mistake_and_names_it(bug, scenario, says):
    out = RLW.check_dapo_normaliser(bug)
    assert not out["passed"] and out["scenario"] == scenario, out
    assert out["message"].startswith("not yet:") and says in out["message"], out["message"]


def test_no_hint_contradicts_itself():
    """A correct answer to float32 precision is never told it weighs '1 × 1/N instead of 1/N'."""
    nearly = RLW.check_dapo_normaliser(lambda l, m, n, p: (l * m).sum() / (n / p) * (1 + 3e-7))
    assert nearly["passed"], nearly["message"]
    off = RLW.check_dapo_normaliser(lambda l, m, n, p: (l * m).sum() / (n / p) * 1.001)
    assert not off["passed"] and "weighs 1.001 × 1/N instead of 1/N" in off["message"], off["message"]


def test_the_checker_covers_processes_accumulation_odd_n_and_masked_tokens():
    procs = [p for _, p in RLW.DAPO_SCENARIOS]
    assert {len(p) for p in procs} >= {1, 2} and {len(p[0]) for p in procs} >= {2, 3}
    rows = [r for p in procs for proc in p for mb in proc for r in mb]
    assert any(isinstance(r, list) and any(v == 0 and 1 in r[i:] for i, v in enumerate(r))
               for r in rows)                                                             # a masked span inside a row
    assert any(isinstance(r, list) and not any(r) for r in rows)                          # a row masked out
    masks = [RLW.scenario_masks(p) for p in procs]
    assert any(len(m) > 1 and int(sum(int(x.sum()) for q in m for x in q)) % len(m) for m in masks)   # N odd, P = 2
    assert all(x.dtype == torch.long for m in masks for q in m for x in q)                # TRL's integer mask


# --- worked solutions ------------------------------------------------------------------------------------------------

def test_worked_two_completions_match_trl():
    ex = RLW.worked_two_completions([3, 12], [1.0, -1.0], 16)
    mask = RL.completion_mask([3, 12], 16)
    for lt in ("grpo", "dapo", "dr_grpo"):
        trl = RLT.trl_microbatch_weights(mask, lt, max_completion_length=16, num_items_in_batch=15)
        assert ex.values["weights"][lt] == pytest.approx([float(trl[0, 0]), float(trl[1, 0])], rel=1e-6)
    assert ex.values["weights"]["grpo"] == pytest.approx([1 / 6, 1 / 24])
    assert "4 times" in ex.markdown


def test_worked_advantages_agree_with_the_library():
    ex = RLW.worked_advantages(REWARDS, 4)
    for s in RL.SCALE_REWARDS:
        assert ex.values["advantages"][s] == pytest.approx(RL.advantages(REWARDS, 4, s).tolist())
    assert ex.values["group_std"] == pytest.approx([0.5, 0.1])
    assert "group 2" in ex.markdown
    page = RLW.worked_advantages([0, 0, 1, 1, 0.4, 0.5, 0.5, 0.6, 1, 1, 1, 1], 4)
    assert "group 2" in page.markdown and "Group 3 has equal rewards" in page.markdown
    assert page.values["advantages"]["group"][8:] == [0.0] * 4


def test_worked_generation_batches_match_trl():
    ex = RLW.worked_generation_batches([20, 60], 2)
    assert ex.values["weights_s1"] == pytest.approx([1 / 40, 1 / 120]) and ex.values["weights_sk"][0] == 1 / 80
    for n, w in zip((20, 60), ex.values["weights_s1"]):
        trl = RLT.trl_microbatch_weights(RL.completion_mask([n], 60), "dapo", max_completion_length=60,
                                         accumulation_steps=2, steps_per_generation=1, num_items_in_batch=n)
        assert float(trl[0, 0]) == pytest.approx(w, rel=1e-6)


# --- bad input ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, says", [
    (lambda: RL.microbatch_weights(HARD_MASK, "gspo"), "unknown loss_type 'gspo'; TRL 1.16.0 has grpo"),
    (lambda: RL.microbatch_weights(HARD_MASK, "dr_grpo"), "pass max_completion_length"),
    (lambda: RL.microbatch_weights(HARD_MASK, "dapo"), "pass it"),
    (lambda: RL.microbatch_weights(HARD_MASK * 2, "grpo"), "only 0 and 1"),
    (lambda: RL.microbatch_weights(HARD_MASK[0], "grpo"), "must be 2-D"),
    (lambda: RL.microbatch_weights(HARD_MASK, "grpo", accumulation_steps=0), "accumulation_steps must be a positive"),
    (lambda: RL.completion_mask([3, 20], 16), "longer than max_completion_length 16"),
    (lambda: RL.split_step(RL.completion_mask([3, 4, 5], 8), 2), "3 rows do not split"),
    (lambda: RL.advantages([1.0, 0.0, 1.0], 2), "do not form groups of num_generations = 2"),
    (lambda: RL.advantages([1.0, 0.0], 1), "at least 2"),
    (lambda: RL.advantages([1.0, float("nan")], 2), "must be finite"),
    (lambda: RLW.family_table([3, 4], [1.0], max_completion_length=8, rows_per_microbatch=1), "one advantage per"),
    (lambda: RLW.generation_batches([3, 4, 5], 8, 1, 2, 1), "do not split into generation batches"),
    (lambda: RLW.worked_generation_batches([20, 60], 3), "one micro-batch per accumulation step"),
    (lambda: RLT.trl_compute_loss(HARD_MASK, "dapo", advantages=[1.0], num_items_in_batch=9.0),
     "one advantage per row"),
])
def test_bad_input_is_a_clear_error(call, says):
    with pytest.raises(RL.RLLossError, match=re.escape(says)):
        call()
