"""Bad result files give a clear error that names the file (and nothing is half-analysed)."""

import json

import numpy as np
import pytest
from docgrad.results.cells import load_cells
from docgrad.core.constants import MAX_NONFINITE_DRAWS
from docgrad.results import stats
from docgrad.results.format import GROUPS, ResultFileError
from docgrad.results.synthetic import Profile, population_gram, write_gram_cell

N_DOCS, M = 4, 8


def _cell(tmp_path, shard_size=2, **kw):
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    return write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=shard_size, **kw)


def _rewrite(npz, **changes):
    with np.load(npz) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        arrays.pop(k)
    np.savez_compressed(npz, **arrays)


def _fails(tmp_path, needle, path):
    with pytest.raises(ResultFileError) as e:
        load_cells(tmp_path)
    msg = str(e.value)
    assert str(path) in msg or path.name in msg, msg
    assert needle in msg, msg
    return msg


def test_truncated_npz_names_the_file(tmp_path):
    f = _cell(tmp_path)[1]
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    _fails(tmp_path, "truncated or corrupt", f)


def test_corrupt_npz_names_the_file(tmp_path):
    f = _cell(tmp_path)[0]
    f.write_bytes(b"not a zip file at all" * 10)
    _fails(tmp_path, "cannot read npz", f)


def test_index_and_gram_shapes_that_disagree(tmp_path):
    f = _cell(tmp_path)[0]
    with np.load(f) as z:
        K = z["gram_attn"]
    _rewrite(f, gram_attn=K[:-1, :-1])
    _fails(tmp_path, "gram_attn has shape", f)


def test_non_finite_gram_entries(tmp_path):
    f = _cell(tmp_path)[1]
    with np.load(f) as z:
        K = z["gram_mlp"].copy()
    K[3, 5] = np.nan
    _rewrite(f, gram_mlp=K)
    _fails(tmp_path, "non-finite", f)


def test_missing_group(tmp_path):
    f = _cell(tmp_path)[0]
    _rewrite(f, gram_embed=None, sqnorm_embed=None)
    _fails(tmp_path, "missing group", f)


def test_missing_json_metadata(tmp_path):
    f = _cell(tmp_path)[0]
    f.with_suffix(".json").unlink()
    _fails(tmp_path, "metadata", f)


def test_file_name_and_args_with_different_chunk_sizes(tmp_path):
    f = _cell(tmp_path)[1]
    meta = json.loads(f.with_suffix(".json").read_text())
    meta["args"]["chunk"] = 256
    f.with_suffix(".json").write_text(json.dumps(meta))
    _fails(tmp_path, "mixed chunk sizes", f)


def test_shards_of_one_cell_with_different_chunks_per_document(tmp_path):
    _cell(tmp_path)
    K = population_gram(2, 4, Profile(exch=0.2), 1.0, 0.1)
    (f,) = write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=2, m=4, shard_size=2, doc_offset=10)
    _fails(tmp_path, "disagree on chunks per document", f)


def test_overlapping_shards_are_refused(tmp_path):
    _cell(tmp_path)
    K = population_gram(2, M, Profile(exch=0.2), 1.0, 0.1)
    (f,) = write_gram_cell(tmp_path / "again", {g: K for g in GROUPS}, n_docs=2, m=M, shard_size=2,
                           doc_offset=1)
    msg = _fails(tmp_path, "overlapping shards", f)
    assert "document 1 in" in msg and "document 2 in" in msg


def test_a_document_missing_a_chunk(tmp_path):
    f = _cell(tmp_path)[0]
    with np.load(f) as z:
        idx = z["index"].copy()
    idx[3, 1] = 99
    _rewrite(f, index=idx)
    _fails(tmp_path, "expected chunks 0..", f)


def test_cell_without_any_cross_document_pair(tmp_path):
    paths = _cell(tmp_path, shard_size=1)
    with pytest.raises(ResultFileError, match="no cross-document pairs") as e:
        load_cells(tmp_path)
    assert paths[0].name in str(e.value)


def test_empty_results_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no result files"):
        load_cells(tmp_path)


def test_cli_reports_bad_input_and_writes_nothing(tmp_path, capsys):
    from docgrad.runtime.cli import main

    f = _cell(tmp_path / "res")[0]
    f.write_bytes(b"garbage")
    out = tmp_path / "report.json"
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(out), "--resamples", "0"]) == 2
    err = capsys.readouterr().err
    assert f.name in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_report_json_turns_numpy_nan_into_null():
    import json

    import numpy as np
    from docgrad.fileio import to_jsonable

    out = to_jsonable({"a": np.float64("nan"), 1: np.arange(2), "b": np.bool_(True), "c": float("nan")})
    assert json.loads(json.dumps(out, allow_nan=False)) == {"a": None, "1": [0, 1], "b": True, "c": None}


def test_a_probes_partial_folder_beside_the_results_is_not_read(tmp_path):
    """A running (or killed) probe keeps per-document npz files in .partial/ under the results folder."""
    files = _cell(tmp_path)
    partial = files[0].parent / ".partial" / "WEB_c512_d0-16"
    partial.mkdir(parents=True)
    np.savez(partial / "doc_00000.npz", sketch=np.zeros((2, 4, 8), dtype=np.float32))
    assert len(load_cells(tmp_path)) == 1


# --- impossible data is refused, not analysed (each of these printed a verdict MEASURED before) ------------

def test_an_asymmetric_gram_is_refused(tmp_path):
    f = _cell(tmp_path)[0]
    with np.load(f) as z:
        K = z["gram_mlp"].copy()
    K[0, 3] += 0.5 * np.abs(K).max()                   # upper triangle changed, lower not
    _rewrite(f, gram_mlp=K)
    _fails(tmp_path, "gram_mlp is not symmetric", f)


def test_rounding_level_asymmetry_is_accepted(tmp_path):
    f = _cell(tmp_path)[0]
    with np.load(f) as z:
        K = z["gram_mlp"].copy()
    K[0, 3] *= 1 + 1e-13
    _rewrite(f, gram_mlp=K)
    assert len(load_cells(tmp_path)) == 1


def test_negative_squared_norms_are_refused(tmp_path):
    f = _cell(tmp_path)[1]
    with np.load(f) as z:
        sq = z["sqnorm_embed"].copy()
    sq[2] = -1.0
    _rewrite(f, sqnorm_embed=sq)
    _fails(tmp_path, "sqnorm_embed has 1 negative squared norm", f)


def test_a_chunk_with_zero_gradient_is_refused(tmp_path):
    f = _cell(tmp_path)[1]
    with np.load(f) as z:
        zeros = {f"sqnorm_{g}": np.where(np.arange(z["loss"].size) == 5, 0.0, z[f"sqnorm_{g}"]) for g in GROUPS}
    _rewrite(f, **zeros)
    _fails(tmp_path, "zero gradient", f)


def test_the_same_documents_under_new_ids_are_refused(tmp_path):
    f0, f1 = _cell(tmp_path)
    h = {str(d): f"{d:064x}" for d in range(N_DOCS)}
    for f, docs in ((f0, (0, 1)), (f1, (2, 3))):
        j = f.with_suffix(".json")
        meta = json.loads(j.read_text())
        meta["spans_sha256"] = {str(d): h[str(d - 2 if d >= 2 else d)] for d in docs}   # docs 2, 3 repeat 0, 1
        j.write_text(json.dumps(meta))
    with pytest.raises(ResultFileError, match="documents 0 .* and 2 .* have the same token span"):
        load_cells(tmp_path)


def test_metadata_that_is_not_an_object_is_a_clear_error(tmp_path):
    f = _cell(tmp_path)[0]
    f.with_suffix(".json").write_text("[1, 2, 3]")
    _fails(tmp_path, "expected a JSON object", f.with_suffix(".json"))


@pytest.mark.parametrize("resamples", [1, 39, 10**12, -1])
def test_resamples_an_interval_cannot_use_are_refused(tmp_path, resamples, capsys):
    from docgrad.runtime.cli import main

    _cell(tmp_path / "res")
    out = tmp_path / "r.json"
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(out), "--resamples", str(resamples)]) == 2
    err = capsys.readouterr().err
    assert "resamples must be 0" in err and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("bad", ["file", "dir"])
def test_analyze_out_that_cannot_be_written_is_refused_before_the_analysis(tmp_path, bad, capsys):
    from docgrad.runtime.cli import main

    _cell(tmp_path / "res")
    (tmp_path / "plain").write_text("x")
    (tmp_path / "adir").mkdir()
    out = tmp_path / "plain" / "r.json" if bad == "file" else tmp_path / "adir"
    assert main(["analyze", "--results", str(tmp_path / "res"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert ("is a file, not a directory" if bad == "file" else "is a directory") in err
    assert "verdict" not in capsys.readouterr().out


def test_analyze_of_a_missing_directory_is_one_line(tmp_path, capsys):
    from docgrad.runtime.cli import main

    assert main(["analyze", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "no result files" in err and len(err.strip().splitlines()) == 1


def test_load_cells_docs_reads_only_the_shards_inside_the_range(tmp_path):
    """With 48-document shards beside the published design's d0-16 file, docs=(0, 16) analyses exactly the
    first file's documents and None pools every shard."""
    _cell(tmp_path, shard_size=2)                          # d0-2, d2-4
    both = load_cells(tmp_path)
    first = load_cells(tmp_path, docs=(0, 2))
    (cb,), (cf,) = both.values(), first.values()
    assert cb.doc_ids == [0, 1, 2, 3] and cf.doc_ids == [0, 1] and len(cf.shards) == 1
    assert load_cells(tmp_path, docs=(0, 4)).keys() == both.keys()


def _edit_json(npz, **args):
    j = npz.with_suffix(".json")
    meta = json.loads(j.read_text())
    meta["args"].update(args)
    j.write_text(json.dumps(meta))


def test_shards_sketched_with_other_buckets_or_seeds_are_not_pooled(tmp_path):
    f = _cell(tmp_path)
    _edit_json(f[1], buckets=1024, seed=7)
    with pytest.raises(ResultFileError, match=r"args.buckets is 1024 but .* shards sketched differently"):
        load_cells(tmp_path)


@pytest.mark.parametrize("name,change,needle", [
    ("gram_all", lambda K: K * np.where(np.eye(len(K)) > 0, 1, 100), "Cauchy-Schwarz"),
    ("sqnorm_all", lambda s: s * 1e6, "do not belong together"),
    ("gram_all", lambda K: K.astype(complex), "must hold real numbers"),
    ("gram_all", lambda K: K > 0, "must hold real numbers"),
    ("index", lambda i: i.astype(float), "'index' must hold integers"),
    ("index", lambda i: i - 5, "numbers are >= 0"),
])
def test_values_a_gram_file_cannot_hold_are_refused(tmp_path, name, change, needle):
    f = _cell(tmp_path)[0]
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    key = name if name in arrays else next(k for k in arrays if k.startswith(name.split("_")[0] + "_"))
    _rewrite(f, **{key: change(arrays[key])})
    _fails(tmp_path, needle, f)


@pytest.mark.parametrize("args,needle", [
    ({"context": "Causal"}, "args.context must be one of standalone, standalone-bos, causal"),
    ({"docs": [0, 3]}, "args.docs is [0, 3] but the npz holds documents"),
])
def test_metadata_that_disagrees_with_its_npz_is_refused(tmp_path, args, needle):
    f = _cell(tmp_path)[0]
    _edit_json(f, **args)
    _fails(tmp_path, needle, f.with_suffix(".json"))


def test_an_exact_reference_row_outside_the_file_is_refused(tmp_path):
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    f = write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=2,
                        exact_ref_dot=4 * K[0])[0]
    j = f.with_suffix(".json")
    meta = json.loads(j.read_text())
    meta["exact_ref_row"] = 9999
    j.write_text(json.dumps(meta))
    _fails(tmp_path, "exact_ref_row is 9999, outside the file's 16 rows", j)


def _verdict(root):
    return stats.analyze(root, resamples=40).verdict


def test_cells_whose_estimates_are_not_numbers_never_reach_measured(tmp_path):
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    for corpus in ("CODE", "WEB"):
        write_gram_cell(tmp_path / "ok", {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS,
                        corpus=corpus, chunk=2048, exact_ref_dot=4 * K[0])
    base = _verdict(tmp_path / "ok")
    assert not base.startswith("MEASURED") or "G1, G2 and G3" in base
    # no cross-document signal: S_cross = 0
    X = K.copy()
    same = np.kron(np.eye(N_DOCS), np.ones((M, M))) > 0
    X[~same] = 0.0
    write_gram_cell(tmp_path / "s0", {g: X for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, chunk=2048)
    assert "not estimable: S_cross = " in _verdict(tmp_path / "s0")
    # four chunks of 512 tokens: no 16K window
    write_gram_cell(tmp_path / "short", {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, chunk=512)
    assert "no R(16K)" in _verdict(tmp_path / "short")
    # two documents: no interval
    K2 = population_gram(2, M, Profile(exch=0.2), 1.0, 0.1)
    write_gram_cell(tmp_path / "two", {g: K2 for g in GROUPS}, n_docs=2, m=M, shard_size=2, chunk=2048)
    v = _verdict(tmp_path / "two")
    assert v.startswith("INCOMPLETE") and "2 documents: intervals need at least 4" in v


def test_a_two_document_control_gives_no_r_rel_interval_and_no_verdict(tmp_path):
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    K2 = population_gram(2, M, Profile(), 1.0, 0.1)
    write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, corpus="CODE", chunk=2048)
    write_gram_cell(tmp_path, {g: K2 for g in GROUPS}, n_docs=2, m=M, shard_size=2, corpus="WEB", chunk=2048)
    a = stats.analyze(tmp_path, resamples=40)
    (rel,) = a.R_rel
    assert rel.R_rel is not None and rel.R_rel_ci == (None, None)
    assert a.verdict.startswith("INCOMPLETE") and "WEB" in a.verdict


def test_intervals_of_too_few_documents_are_undefined_and_no_gate_passes_on_them(tmp_path):
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    K2 = population_gram(2, M, Profile(exch=0.2), 1.0, 0.1)
    write_gram_cell(tmp_path / "cell", {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, corpus="CODE",
                    chunk=2048, exact_ref_dot=4 * K[0])
    write_gram_cell(tmp_path / "cell", {g: K2 for g in GROUPS}, n_docs=2, m=M, shard_size=2, corpus="WEB", chunk=2048)
    a = stats.analyze(tmp_path / "cell", resamples=40)
    web = a.cell("WEB")
    assert web.all.R_16K is not None and web.all.R_16K_ci == (None, None)     # a number, but no interval
    assert web.all.interval("S_cross") == (None, None) and web.groups["attn"].R_16K_ci == (None, None)
    assert a.gates["G2"]["pass"] is None and a.gates["G3"]["pass"] is None
    assert a.verdict.startswith("INCOMPLETE (gate(s) G2, G3 not evaluated")
    assert a.cell("CODE").all.R_16K_ci[0] is not None                          # four documents keep theirs


def test_estimates_that_divide_by_a_non_positive_sigma2_or_s_cross_are_not_numbers(tmp_path):
    same = np.kron(np.eye(N_DOCS), np.ones((M, M))) > 0
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    flat = np.full_like(K, 2.0)                                     # every chunk the same gradient: sigma2 = 0
    write_gram_cell(tmp_path / "s2", {g: flat for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, chunk=2048)
    e = stats.analyze(tmp_path / "s2", resamples=40).cells[0].all
    assert np.isnan(e.R_16K) and np.isnan(e.rho_long) and np.isnan(e.B_simple_shuf_tokens)
    assert e.R_16K_ci == (None, None)
    write_gram_cell(tmp_path / "s0", {g: np.where(same, K, 0.0) for g in GROUPS}, n_docs=N_DOCS, m=M,
                    shard_size=N_DOCS, chunk=2048)
    a = stats.analyze(tmp_path / "s0", resamples=40)
    e = a.cells[0].all
    assert np.isnan(e.B_simple_shuf_tokens) and e.interval("B_simple_shuf") == (None, None)
    assert np.isfinite(e.R_16K)                                     # R needs no mean gradient
    assert "not estimable: S_cross" in a.verdict


def test_intervals_of_many_non_finite_draws_are_undefined_and_no_gate_passes_on_them(tmp_path):
    # four documents in two-document files: a resample that draws from one file only has no cross-document pair,
    # so 17-24% of the draws are not finite; the percentiles of the finite rest are no interval of the cell
    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    Kw = population_gram(N_DOCS, M, Profile(), 1.0, 0.1)
    write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=2, corpus="CODE", chunk=2048,
                    exact_ref_dot=4 * K[0])
    write_gram_cell(tmp_path, {g: Kw for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=2, corpus="WEB", chunk=2048)
    a = stats.analyze(tmp_path, resamples=200, seed=0)
    for c in a.cells:
        assert c.n_docs == 4 and c.all.boot_nonfinite_frac > MAX_NONFINITE_DRAWS
        assert np.isfinite(c.all.R_16K) and c.all.R_16K_ci == (None, None)       # a number, but no interval
        assert c.all.interval("S_cross") == (None, None) and c.all.interval("rho", 2048) == (None, None)
        assert c.groups["attn"].R_16K_ci == (None, None)
    assert a.R_rel[0].R_rel is not None and a.R_rel[0].R_rel_ci == (None, None)
    assert a.gates["G2"]["pass"] is None and a.gates["G3"]["pass"] is None
    assert a.verdict.startswith("INCOMPLETE (gate(s) G2, G3 not evaluated")
    assert "of the R(16K) bootstrap draws are not finite (at most 5%)" in a.verdict
    # the same cells in one file each: every resample has cross pairs, the intervals are defined and gate
    write_gram_cell(tmp_path / "one", {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, corpus="CODE",
                    chunk=2048, exact_ref_dot=4 * K[0])
    write_gram_cell(tmp_path / "one", {g: Kw for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, corpus="WEB",
                    chunk=2048)
    one = stats.analyze(tmp_path / "one", resamples=200, seed=0)
    assert all(c.all.R_16K_ci[0] is not None for c in one.cells) and one.R_rel[0].R_rel_ci[0] is not None
    assert one.gates["G2"]["pass"] is not None and one.gates["G3"]["pass"] is not None


def test_an_interval_is_undefined_when_more_than_its_share_of_draws_is_not_finite():
    draws = np.linspace(1.0, 2.0, 100)
    assert stats.defined_ci(draws) == pytest.approx([1.025, 1.975])
    few, many = draws.copy(), draws.copy()
    few[:5] = np.nan                                                  # 5%: still an interval
    many[:6] = np.inf                                                 # 6%: undefined
    assert stats.defined_ci(few)[0] is not None and stats.defined_ci(many) == [None, None]
    assert stats.defined_ci(np.stack([few, many], axis=1)) == [stats.defined_ci(few), [None, None]]


def test_the_summary_table_keeps_its_columns_where_values_are_undefined(tmp_path):
    from docgrad.presentation import tables

    K = population_gram(N_DOCS, M, Profile(exch=0.2), 1.0, 0.1)
    flat = np.full_like(K, 2.0)                                     # sigma2 = 0: rho_long, R, B_simple undefined
    K2 = population_gram(2, M, Profile(), 1.0, 0.1)                 # two documents: no interval
    write_gram_cell(tmp_path, {g: K for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, corpus="CODE",
                    chunk=2048)
    write_gram_cell(tmp_path, {g: flat for g in GROUPS}, n_docs=N_DOCS, m=M, shard_size=N_DOCS, corpus="BOOKS",
                    chunk=2048)
    write_gram_cell(tmp_path, {g: K2 for g in GROUPS}, n_docs=2, m=M, shard_size=2, corpus="WEB", chunk=2048)
    a = stats.analyze(tmp_path, resamples=40)
    header, *rows = tables.summary_table(a).splitlines()[:4]
    assert [r.split()[2] for r in rows] == ["BOOKS", "CODE", "WEB"]
    ends, at = [], header.index("corpus")
    for name in (" C", "docs", "S_cross", "sigma2", "rho_long", "R(16K) ", "R(16K) 95%", "B_simple", " s"):
        at = header.index(name, at) + len(name.rstrip())
        ends.append(at)                                             # the right-aligned columns end here
    for r in rows:                    # every column ends where its header ends ('-' for an undefined value)
        assert len(r) == len(header), r
        assert all(r[i - 1] != " " and (i == len(r) or r[i] == " ") for i in ends), (header, r)
    books, code, web = rows
    assert books.split()[7:11] == ["-", "-", "-", "-"]              # rho_long, R(16K), its interval, B_simple
    assert web.split()[9] == "-" and "[" in code                    # an undefined interval vs a defined one


def test_a_document_range_that_holds_no_whole_file_is_named_as_such(tmp_path):
    from docgrad.results.synthetic import write_synthetic_results

    write_synthetic_results(tmp_path, n_docs=4, m=8, chunk=2048, shard_size=2, dim=32)
    with pytest.raises(ResultFileError, match=r"no standalone result file holds only documents 1:3 \(a cell is "
                                              r"pooled from whole files; \d+ file\(s\) hold others"):
        load_cells(tmp_path, docs=(1, 3))
