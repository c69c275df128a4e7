"""Page 01d's library (docgrad.teaching.rl_losses): TRL's GRPO loss normalisers and reward scaling, checked against
the installed TRL's own code and source, and the dapo-normaliser exercise's checker."""

import re
from pathlib import Path

import pytest
import torch
from docgrad.teaching import rl_losses as RL

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


# --- the weights, against TRL's own _compute_loss ---------------------------------------------------------------

@pytest.mark.parametrize("loss_type", list(RL.LOSS_TYPES))
@pytest.mark.parametrize("G, P, S, N", [(1, 1, None, None), (2, 1, None, 41.0), (3, 2, None, 97.0), (2, 2, 4, 150.0)])
def test_library_weights_equal_the_installed_trl_compute_loss(loss_type, G, P, S, N):
    kw = dict(max_completion_length=12, accumulation_steps=G, num_processes=P, steps_per_generation=S,
              num_items_in_batch=N if N is not None else float(HARD_MASK.sum()))
    ours = RL.microbatch_weights(HARD_MASK, loss_type, **kw)
    trl = RL.trl_microbatch_weights(HARD_MASK, loss_type, **kw)
    assert torch.allclose(ours, trl, rtol=1e-6, atol=1e-9), (loss_type, ours, trl)
    assert float(ours[2].abs().sum()) == 0 and float(ours[1, 2:4].abs().sum()) == 0     # masked tokens weigh 0


def test_the_trl_run_would_catch_a_wrong_normaliser():
    """The comparison above can fail: bnpo's local count is not dapo's global one on the same micro-batch."""
    kw = dict(max_completion_length=12, accumulation_steps=2, num_items_in_batch=60.0)
    assert not torch.allclose(RL.microbatch_weights(HARD_MASK, "bnpo", **kw),
                              RL.trl_microbatch_weights(HARD_MASK, "dapo", **kw))


def test_microbatch_loss_is_the_weighted_sum_of_token_losses():
    l = torch.arange(40, dtype=torch.float64).reshape(4, 10) / 10
    got = RL.microbatch_loss(l, HARD_MASK, "grpo")
    rows = [(l[i] * HARD_MASK[i]).sum() / max(float(HARD_MASK[i].sum()), 1.0) for i in range(4)]
    assert float(got) == pytest.approx(float(sum(rows) / 4))
    with pytest.raises(RL.RLLossError, match="per_token_loss has shape"):
        RL.microbatch_loss(l[:, :5], HARD_MASK, "grpo")


# --- the step weights: the answer box's column ----------------------------------------------------------------

LENGTHS = [3, 6, 9, 14, 4, 8, 12, 16]


def test_step_weights_are_the_answer_box_formulas():
    L, B = 16, 4
    mask = RL.completion_mask(LENGTHS, L)
    masks = RL.split_step(mask, B, 1)
    R, N, G, P = len(LENGTHS), sum(LENGTHS), 2, 1
    w = {lt: RL.flat_step_weights(masks, lt, max_completion_length=L) for lt in RL.LOSS_TYPES}
    n = torch.tensor(LENGTHS, dtype=torch.float64)
    for lt in ("grpo", "sapo"):
        assert torch.allclose(w[lt][:, 0], 1 / (R * n))
        assert torch.allclose(w[lt].sum(1), torch.full((R,), 1 / R, dtype=torch.float64))   # equal completion totals
    n_mb = torch.tensor([sum(LENGTHS[:4])] * 4 + [sum(LENGTHS[4:])] * 4, dtype=torch.float64)
    assert torch.allclose(w["bnpo"][:, 0], 1 / (P * G * n_mb))
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
    rows = {r["rows_per_microbatch"]: r for r in RL.bnpo_by_microbatch_size(LENGTHS, 16, [8, 4, 1])}
    assert rows[1]["equals_grpo"] and not rows[1]["equals_dapo"]
    assert rows[8]["equals_dapo"] and not rows[8]["equals_grpo"]
    assert not rows[4]["equals_grpo"] and not rows[4]["equals_dapo"]
    assert rows[4]["bnpo"] == pytest.approx([72 / (2 * 32)] * 4 + [72 / (2 * 40)] * 4)


def test_dapo_over_a_generation_batch_of_two_steps_weighs_by_its_average_tokens_per_step():
    spans = RL.generation_spans_steps(LENGTHS, 16, 4, 2)
    assert [s["tokens"] for s in spans] == [32, 40]
    assert all(s["weight"] == pytest.approx(2 / 72) for s in spans)
    assert [s["scale"] for s in spans] == pytest.approx([32 * 2 / 72, 40 * 2 / 72])
    with pytest.raises(RL.RLLossError, match="pass its num_items_in_batch"):
        RL.step_weights(RL.split_step(RL.completion_mask(LENGTHS, 16), 4, 1), "dapo", steps_per_generation=4)


def test_family_table_length_bias_and_scope_of_the_worked_batch():
    adv = RL.advantages([1, 0, 0, 0, 1, 1, 1, 0.8], 4, "group")
    rows = {r["family"]: r for r in RL.family_table(LENGTHS, adv, max_completion_length=16, rows_per_microbatch=4)}
    assert {f: r["depends_on_other_lengths"] for f, r in rows.items()} == {
        "sequence_mean": False, "local_token_mean": True, "constant": False, "global_token_mean": True,
        "sequence_sum": False}
    assert rows["sequence_mean"]["short_over_long_per_token"] == pytest.approx(16 / 3)
    assert all(rows[f]["short_over_long_per_token"] == pytest.approx(1.0)
               for f in ("constant", "global_token_mean", "sequence_sum"))
    assert rows["sequence_mean"]["loss"] == 0.0                    # advantages sum to 0 per group, equal totals
    assert rows["global_token_mean"]["loss"] == pytest.approx(-float((adv * torch.tensor(LENGTHS)).sum()) / 72)
    assert rows["global_token_mean"]["total_x_R"] == pytest.approx([8 * n / 72 for n in LENGTHS])


# --- advantages: scale_rewards ----------------------------------------------------------------------------------

REWARDS = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.8]


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
    lines = [t.strip() for _, t in RL.trl_excerpts()["advantages"]["lines"]]
    assert [line for line in RL.MIRRORED_ADVANTAGE_LINES if line not in lines] == []


def test_a_changed_advantage_line_stops_the_page(monkeypatch):
    real = RL.trl_excerpts()
    changed = dict(real, advantages=dict(real["advantages"], lines=[
        (no, t.replace("+ 1e-4", "+ 1e-6")) for no, t in real["advantages"]["lines"]]))
    monkeypatch.setattr(RL, "trl_excerpts", lambda: changed)
    with pytest.raises(RL.RLLossError, match="advantage lines changed"):
        RL.explained_matches_installed()


def test_scale_rewards_true_and_false_map_as_grpo_config_maps_them(tmp_path):
    from trl import GRPOConfig

    for given in (True, False, "batch"):
        cfg = GRPOConfig(output_dir=str(tmp_path), scale_rewards=given, use_cpu=True, bf16=False,
                         per_device_train_batch_size=2, num_generations=2, gradient_accumulation_steps=3,
                         report_to=[])
        assert cfg.scale_rewards == RL.normalise_scale_rewards(given)
    assert cfg.loss_type == RL.DEFAULT_LOSS_TYPE and cfg.steps_per_generation == 3          # S = G by default
    with pytest.raises(RL.RLLossError, match="scale_rewards must be"):
        RL.normalise_scale_rewards("groups")


# --- the installed source: the list the page explains -------------------------------------------------------------

def test_the_installed_trl_has_exactly_the_loss_types_and_defaults_explained():
    got = RL.explained_matches_installed()
    assert sorted(set(got["branches"])) == sorted(RL.LOSS_TYPES) == sorted(set(got["config_help"]))
    assert got["default"] == "dapo" and got["scale_rewards_default"] == "group"


def test_a_loss_type_the_page_does_not_explain_stops_it(monkeypatch):
    real = RL.trl_loss_types()
    monkeypatch.setattr(RL, "trl_loss_types", lambda: dict(real, branches=real["branches"] + ["gspo_plus"]))
    with pytest.raises(RL.RLLossError, match=r"new \['gspo_plus'\]"):
        RL.explained_matches_installed()


def test_excerpts_carry_the_installed_files_line_numbers():
    for name, ex in RL.trl_excerpts().items():
        text = (RL.trl_source_path(ex["file"].removeprefix("trl/"))).read_text().splitlines()
        assert ex["lines"] and all(text[no - 1] == t for no, t in ex["lines"]), name
        assert ex["first_line"] == ex["lines"][0][0] and ex["last_line"] == ex["lines"][-1][0]
    norm = "\n".join(t for _, t in RL.trl_excerpts()["normalisers"]["lines"])
    assert "num_items_in_batch" in norm and "max_completion_length" in norm


def test_a_missing_marker_is_a_clear_error(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("a = 1\nb = 2\n")
    with pytest.raises(RL.RLLossError, match="no line contains 'c = 3'"):
        RL.source_excerpt(f, "c = 3", "b")
    assert RL.source_excerpt(f, "a =", "b =")["lines"] == [(1, "a = 1"), (2, "b = 2")]


def test_the_page_explains_every_loss_type_in_its_answer_box_and_asserts_the_list():
    text = PAGE.read_text()
    box = text.split("> **The answer.**")[1].split("# Every number is computed")[0]
    assert set(re.findall(r"`(\w+)`", box)) >= set(RL.LOSS_TYPES)
    assert "assert sorted(set(trl_read[\"branches\"])) == sorted(RL.LOSS_TYPES)" in text


# --- the exercise checker --------------------------------------------------------------------------------------

def local_count(per_token_loss, mask, num_items_in_batch, num_processes):          # bnpo
    return (per_token_loss * mask).sum() / mask.sum()


def per_sequence_mean(per_token_loss, mask, num_items_in_batch, num_processes):    # grpo
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()


def unmasked(per_token_loss, mask, num_items_in_batch, num_processes):
    return per_token_loss.sum() / (num_items_in_batch / num_processes)


def forgets_processes(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / num_items_in_batch


def fixed(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / (num_items_in_batch / num_processes)


def trls_form(per_token_loss, mask, num_items_in_batch, num_processes):
    return (per_token_loss * mask).sum() / (num_items_in_batch.clamp(min=1.0) / num_processes * 2 / 2)


@pytest.mark.parametrize("bug, says", [
    (local_count, "the micro-batch's own token count (TRL's bnpo)"),
    (per_sequence_mean, "a per-completion mean first (TRL's grpo)"),
    (unmasked, "multiply per_token_loss by the mask"),
    (forgets_processes, "each process divides by num_items_in_batch / num_processes"),
    (lambda l, m, n, p: (l * m).sum(-1) / (n / p), "return one number as a 0-dim tensor"),
    (lambda l, m, n, p: torch.tensor(float((l * m).sum() / (n / p))), "no .item()"),
    (lambda l, m, n, p: 2 * (l * m).sum() / (n / p), "off by a constant factor"),
    (lambda l, m, n, p: l.nope, "raised AttributeError"),
])
def test_the_dapo_checker_fails_a_bug_and_says_what_is_wrong(bug, says):
    out = RL.check_dapo_normaliser(bug)
    assert not out["passed"] and out["message"].startswith("not yet:") and says in out["message"], out["message"]


@pytest.mark.parametrize("fix", [fixed, trls_form])
def test_the_dapo_checker_passes_the_fix(fix):
    out = RL.check_dapo_normaliser(fix)
    assert out["passed"] and out["message"].startswith("correct:"), out["message"]


def test_the_checker_covers_processes_accumulation_and_masked_tokens():
    procs = [p for _, p in RL.DAPO_SCENARIOS]
    assert {len(p) for p in procs} >= {1, 2} and {len(p[0]) for p in procs} >= {2, 3}
    rows = [r for p in procs for proc in p for mb in proc for r in mb]
    assert any(isinstance(r, list) and any(v == 0 and 1 in r[i:] for i, v in enumerate(r))
               for r in rows)                                                             # a masked span inside a row
    assert any(isinstance(r, list) and not any(r) for r in rows)                          # a row masked out


# --- worked solutions ------------------------------------------------------------------------------------------------

def test_worked_two_completions_match_trl():
    ex = RL.worked_two_completions([3, 12], [1.0, -1.0], 16)
    mask = RL.completion_mask([3, 12], 16)
    for lt in ("grpo", "dapo", "dr_grpo"):
        trl = RL.trl_microbatch_weights(mask, lt, max_completion_length=16, num_items_in_batch=15)
        assert ex.values["weights"][lt] == pytest.approx([float(trl[0, 0]), float(trl[1, 0])], rel=1e-6)
    assert ex.values["weights"]["grpo"] == pytest.approx([1 / 6, 1 / 24])
    assert "4 times" in ex.markdown


def test_worked_advantages_agree_with_the_library():
    ex = RL.worked_advantages(REWARDS, 4)
    for s in RL.SCALE_REWARDS:
        assert ex.values["advantages"][s] == pytest.approx(RL.advantages(REWARDS, 4, s).tolist())
    assert ex.values["group_std"] == pytest.approx([0.5, 0.1])
    assert "group 2" in ex.markdown


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
    (lambda: RL.family_table([3, 4], [1.0], max_completion_length=8, rows_per_microbatch=1), "one advantage per"),
])
def test_bad_input_is_a_clear_error(call, says):
    with pytest.raises(RL.RLLossError, match=re.escape(says)):
        call()
