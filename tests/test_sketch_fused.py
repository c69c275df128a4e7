"""The fused count sketch (one index_add_ over every block) equals the pre-fused blockwise one: same hash, same
buckets, same exact squared norms and reference dots, to float rounding, on CPU and (where present) CUDA."""

import numpy as np
import pytest
import torch
from docgrad.core.sketch import CountSketch, SignedVectors, reference_sketch
from docgrad.models import tiny_model

torch.set_num_threads(1)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine: the fused sketch on CUDA is not checked"))]

PARAMS = [("l.attn.q", (24, 40), "attn"), ("l.mlp.up", (50, 30), "mlp"), ("emb.embed_tokens", (33, 7), "embed"),
          ("norm", (7,), "other"), ("l.mlp.bias", (3,), "mlp")]


def _vec(seed, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(shape, generator=g).to(device) for n, shape, _ in PARAMS}


def _close(new, old, sketch_tol=1e-5):
    torch.testing.assert_close(new.sketch.cpu(), old.sketch.cpu(), rtol=sketch_tol, atol=sketch_tol)
    np.testing.assert_allclose(new.sqnorm, old.sqnorm, rtol=1e-5)
    if old.ref_dot is not None:
        assert new.ref_dot == pytest.approx(old.ref_dot, rel=1e-5, abs=1e-6)


def _model_grads(arch, device, seed=0):
    model = tiny_model(arch, seed=seed, vocab_size=64, hidden=16, layers=2).to(device)
    ids = torch.randint(0, 64, (24,), generator=torch.Generator().manual_seed(seed)).to(device)
    model.zero_grad(set_to_none=True)
    model(input_ids=ids[None], labels=ids[None]).loss.backward()
    return model


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
@pytest.mark.parametrize("buckets", [1, 5, 64, 1000, 4096])
def test_fused_equals_the_reference_on_a_small_model(device, arch, buckets):
    """Real gradients of a random tiny model: sketch, squared norms and reference dot of the fused path equal
    those of reference_sketch (the pre-fused implementation) at bucket counts below, around and above the
    parameter sizes."""
    model = _model_grads(arch, device)
    fused = CountSketch.from_model(model, buckets, seed=3, fused=True)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if n in fused.params}
    old_first = reference_sketch(fused, grads, keep_signed=True)
    new_first = fused.sketch(grads, keep_signed=True)
    _close(new_first, old_first)
    model2 = _model_grads(arch, device, seed=1)
    grads2 = {n: p.grad.clone() for n, p in model2.named_parameters() if n in fused.params}
    old = reference_sketch(fused, grads2, ref=old_first.signed)
    _close(fused.sketch(grads2, ref=new_first.signed), old)
    _close(fused.sketch(grads2, ref=old_first.signed), old)      # a plain dict as the reference: packed once
    assert all(torch.equal(grads[n], p.grad) for n, p in model.named_parameters() if n in grads)  # untouched


@pytest.mark.parametrize("device", DEVICES)
def test_fused_and_blockwise_paths_agree_and_share_the_hash(device):
    v = _vec(0, device)
    fused = CountSketch(PARAMS, 16, seed=2, device=device, fused=True)
    block = CountSketch(PARAMS, 16, seed=2, device=device, fused=False)
    _close(fused.sketch(v), block.sketch({k: x.clone() for k, x in v.items()}))


def test_default_path_is_blockwise_on_cpu():
    """Measured: the one index_add_ into overlapping windows is ~6x slower than the slice-adds on CPU."""
    assert not CountSketch(PARAMS, 16).fused and CountSketch(PARAMS, 16, fused=True).fused
    assert CountSketch(PARAMS, 16, fused=True).with_buckets(8).fused


def test_fused_sketch_zeroes_parameters_missing_from_a_later_call():
    """The work buffer is reused: a parameter present in one call and absent in the next counts as zero then,
    not as its stale values."""
    cs = CountSketch(PARAMS, 16, seed=0, fused=True)
    v = _vec(1)
    cs.sketch(v)
    part = {k: x for k, x in v.items() if k != "l.mlp.up"}
    _close(cs.sketch(part), reference_sketch(cs, part))
    none = dict(part, **{"l.mlp.up": None})
    _close(cs.sketch(none), reference_sketch(cs, part))


def test_fused_fold_and_signed_views():
    """signed_views() is s * g of the last call (the fused path leaves the vectors alone); folding it at another
    bucket count equals sketching the vectors at that count; keep_signed returns a copy that outlives the call."""
    big = CountSketch(PARAMS, 64, seed=1, fused=True)
    small = big.with_buckets(8)
    assert all(small.params[n].signs is big.params[n].signs for n in big.params)
    v = _vec(2)
    first = big.sketch(v, keep_signed=True)
    assert isinstance(first.signed, SignedVectors) and set(first.signed) == set(v)
    views = big.signed_views()
    for n, x in v.items():
        torch.testing.assert_close(views[n], x.reshape(-1) * big.params[n].signs)
    torch.testing.assert_close(small.fold(views), reference_sketch(small, v).sketch, rtol=1e-5, atol=1e-5)
    big.sketch(_vec(3))                                   # overwrites the work buffer, not the kept copy
    for n, x in v.items():
        torch.testing.assert_close(first.signed[n], x.reshape(-1) * big.params[n].signs)


def test_blockwise_signed_views_are_the_in_place_gradients():
    cs = CountSketch(PARAMS, 16, seed=0)
    v = _vec(4)
    keep = {k: x.clone() for k, x in v.items()}
    cs.sketch(v, inplace=True)
    for n, x in cs.signed_views().items():
        assert x.data_ptr() == v[n].data_ptr()
        torch.testing.assert_close(x, keep[n].reshape(-1) * cs.params[n].signs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the script would run the whole GPU check")
def test_gpu_checks_script_says_nothing_was_measured_without_cuda(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_checks.sh"
    r = subprocess.run(["bash", str(script), str(tmp_path / "out")], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert r.returncode == 2 and "no CUDA device" in r.stderr and "nothing was measured" in r.stderr
    assert list((tmp_path / "out").iterdir()) == []          # no output file that could look like a result
