"""The teaching pages' statements about the installed libraries (docgrad.teaching.installed, .history): every line a
page quotes is in the installed source at the line numbers it gives, the installed Trainer counts as the page's
version range says, and the executed pages state what the installed versions do (a page executed with another
version fails here until it is re-executed)."""

import json
from pathlib import Path

import pytest
import torch
from docgrad.models import tiny_model
from docgrad.teaching import history as H
from docgrad.teaching import installed as I
from docgrad.teaching import packing as K
from docgrad.teaching import reduction as R
from docgrad.teaching import worked as W

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
ALL_CLAIMS = {**{f"trainer.{k}": c for k, c in I.TRAINER_CLAIMS.items()},
              **{f"packing.{k}": c for k, c in I.PACKING_CLAIMS.items()},
              **{f"pad.{k}": c for k, c in I.PAD_CLAIMS.items()},
              **{f"ce.{k}": c for k, c in I.CROSS_ENTROPY_CLAIMS.items()}}


@pytest.fixture(scope="module")
def llama():
    return tiny_model("llama")


# --- excerpts of the installed source ------------------------------------------------------------------------

def test_every_line_a_page_quotes_is_in_the_installed_source():
    read = I.read_claims(ALL_CLAIMS)
    assert {k: c.get("error") for k, c in read.items() if not c["found"]} == {}


def test_an_excerpt_names_the_file_and_the_line_numbers_of_the_installed_source():
    import transformers

    ex = I.excerpt(f"{I.TRAINER}._get_num_items_in_batch", r"num_items_in_batch = sum\(labels\.ne")
    path = Path(transformers.__file__).parent.parent / ex.file
    assert ex.file == "transformers/trainer.py" and ex.version == transformers.__version__
    file_lines = path.read_text().splitlines()
    assert list(ex.lines) == file_lines[ex.first - 1:ex.last]
    assert ex.cite() == f"transformers/trainer.py, line {ex.first}, transformers {transformers.__version__}"
    wrapped = I.excerpt("transformers.models.llama.modeling_llama.LlamaForCausalLM.forward",
                        r"self\.loss_function\(")          # a decorated method: the file of the function itself
    assert wrapped.file == "transformers/models/llama/modeling_llama.py"


def test_a_line_that_is_gone_is_reported_and_stops_the_page():
    gone = {"x": I.Claim("transformers.loss.loss_utils.fixed_cross_entropy", r"no such line", "a claim")}
    read = I.read_claims(gone)
    assert read["x"]["found"] is False and "no line matches" in read["x"]["error"]
    assert "**not found**" in I.claims_markdown(read)
    with pytest.raises(I.SourceChanged, match="fixed_cross_entropy"):
        I.require(read)
    with pytest.raises(I.SourceChanged, match="has no 'nope'"):
        I.excerpt("transformers.trainer.Trainer.nope", "x")


# --- the count num_items_in_batch, by release -------------------------------------------------------------------

def test_the_count_rule_of_each_checked_release():
    assert I.count_rule("4.45.2")["rule"] == "none"
    assert I.count_rule("4.46.0")["rule"] == I.count_rule("4.46.1")["rule"] == "shifted"
    assert I.count_rule("4.46.2")["rule"] == I.count_rule("5.9.0")["rule"] == "unshifted"
    assert I.count_rule("5.10.1")["rule"] == I.count_rule("5.24.0")["rule"] == "shifted"
    for rule, versions in I.COUNT_CHECKED.items():
        assert all(I.count_rule(v)["rule"] == rule for v in versions), rule
    assert [r["range"] for r in I.count_ranges()] == ["before 4.46.0", "4.46.0 to 4.46.1", "4.46.2 to 5.9.0",
                                                      "from 5.10.1 on"]


def test_the_installed_trainer_counts_as_the_pages_range_for_its_version_says(llama):
    """Fails when an installed transformers counts otherwise than the page says for its version."""
    one = [R.causal_lm_labels(torch.arange(50), 0)[None]]                        # page 01a, exercise 2
    out = I.count_check(llama, one)
    assert out["agrees"], out
    assert (out["shifted_count"], out["unshifted_count"]) == (49, 50)
    assert out["installed_count"] == {"shifted": 49, "unshifted": 50, "none": None}[out["rule"]]
    assert W.target_count(50, 0).values["without_prompt"] == out["shifted_count"]
    docs = R.make_documents([64, 16, 40], [5, 0, 3], seed=2)                   # prompts and padding
    labels = [R.pad_batch(docs[:2])[2], R.pad_batch(docs[2:])[2]]
    assert I.count_check(llama, labels)["agrees"]
    assert I.expected_count(labels, "shifted") == sum(d["n_targets"] for d in docs)


def test_the_accepts_loss_kwargs_scan_finds_classes_that_set_it_to_false():
    s = I.accepts_loss_kwargs_summary()
    rows = I.accepts_loss_kwargs_classes()
    assert s["false"] == sum(r["value"] == "False" for r in rows) > 0
    assert s["generation_heads"] == sum(r["class"].endswith("ForConditionalGeneration") for r in rows
                                        if r["value"] == "False")
    head = next(r for r in rows if r["class"].endswith("ForConditionalGeneration"))
    import importlib

    mod = importlib.import_module(f"transformers.models.{head['model']}.modeling_{head['model']}")
    assert getattr(mod, head["class"]).accepts_loss_kwargs is False          # the scan reads what Python sees


# --- what changed when -------------------------------------------------------------------------------------------

def test_every_change_the_box_quotes_is_in_the_installed_source():
    missing = [c.source for c in H.CHANGES if H.verify(c)["found"] is False]
    assert missing == []


def test_what_changed_when_dates_links_release_ranges_and_versions():
    box = H.what_changed_when()
    assert all(c.url.startswith("https://") and c.date and set(c.topics) <= set(H.TOPICS) for c in H.CHANGES)
    for pr in ("#34191", "#34198", "#34283", "#34373", "#35438", "#39395", "#45994", "#46204"):
        assert pr in box
    assert "first in 5.10.1 (not in 5.9.0" in box and "Executed with torch " in box and "Installed: `" in box
    assert [c.source for c in H.changes_for(["packing"])] == ["Hugging Face blog, packing with FlashAttention-2"]
    with pytest.raises(ValueError, match="unknown topic"):
        H.changes_for(["rl"])


# --- the executed pages state what the installed versions do --------------------------------------------------

def _twin(name):
    path = ROOT / "figures" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"page {name} has not been executed")
    return json.loads(path.read_text())


def _cites(read):
    return {k: (c["found"], c.get("cite")) for k, c in read.items()}


@pytest.mark.parametrize("page,topics", [("01_loss_reduction", ("cross_entropy",)),
                                         ("01a_gradient_accumulation", ("accumulation",)),
                                         ("01b_real_trainers", ("accumulation", "data_parallel")),
                                         ("01c_packing_and_denominators", ("packing", "cross_entropy"))])
def test_each_pages_history_box_quotes_the_installed_lines(page, topics):
    assert [(r["source"], r["found"], r.get("cite")) for r in _twin(page)["what_changed_when"]] == \
        [(r["source"], r["found"], r.get("cite")) for r in H.rows(topics)]


def test_page_01a_states_the_installed_trainers_count(llama):
    t = _twin("01a_gradient_accumulation")
    ex2 = t["exercises"]["2"]["installed_count"]
    live = I.count_check(llama, [R.causal_lm_labels(torch.arange(50), 0)[None]])
    assert {k: ex2[k] for k in ("version", "rule", "installed_count")} == \
        {k: live[k] for k in ("version", "rule", "installed_count")}
    assert t["installed_count"]["version"] == live["version"] and t["installed_count"]["agrees"]


def test_page_01_quotes_the_installed_collators_mask():
    assert _cites(_twin("01_loss_reduction")["pad_is_eos"]["source"]) == _cites(I.read_claims(I.PAD_CLAIMS))


def test_page_01b_states_what_the_installed_trainer_does():
    t = _twin("01b_real_trainers")
    assert t["accepts_loss_kwargs"] == I.accepts_loss_kwargs_summary()
    assert _cites(t["transformers"]["claims"]) == _cites(I.read_claims(I.TRAINER_CLAIMS))
    count = t["transformers"]["installed_count"]
    assert count["agrees"] and count["version"] == I.package_version("transformers")
    assert count["installed_count"] == t["trainer"]["num_items"]["n_targets_total"]      # the shift-aware count


def test_page_01c_states_what_the_installed_collators_do(llama):
    t = _twin("01c_packing_and_denominators")
    assert _cites(t["packing_source"]) == _cites(I.read_claims(I.PACKING_CLAIMS))
    assert _cites(t["cross_entropy_source"]) == _cites(I.read_claims(I.CROSS_ENTROPY_CLAIMS))
    flat = t["collators"]["transformers"]["input_ids"][0]
    docs, start = [], 0
    for n in t["collators"]["lengths"]:
        docs.append(flat[start:start + n])
        start += n
    assert K.collate_both(docs) == t["collators"]
    eos = t["separator"]["id"]
    assert K.counts_of_a_packed_batch(llama, [d[:-1] for d in docs], eos) == t["packed_batch_counts"]
