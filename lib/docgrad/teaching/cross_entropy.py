"""What cross_entropy's mean divides by (page 01c, section 3).

For class-index targets, torch.nn.functional.cross_entropy(reduction='mean') divides the summed loss by the sum of
the class weights of the non-ignored targets, sum_i w[y_i]: their count when every class weight is 1, and the
plain mean whenever all class weights are equal (a common w cancels). With label_smoothing eps over C classes each
non-ignored target's loss is (1 - eps) w[y_i] (-log p_i[y_i]) + (eps / C) sum_c w[c] (-log p_i[c]), over the same
denominator. `cross_entropy_by_hand` writes this out in float64; `cross_entropy_cases` compares it with PyTorch.
"""

from __future__ import annotations

import numpy as np

from docgrad.teaching.reduction import IGNORE_INDEX, ReductionError


def cross_entropy_by_hand(logits, targets, weight=None, label_smoothing: float = 0.0,
                          ignore_index: int = IGNORE_INDEX) -> dict:
    """torch.nn.functional.cross_entropy(reduction='mean') written out in float64 numpy for class-index targets.

    Per non-ignored target i with class y_i, C classes, class weights w (all 1 when None), smoothing eps:
        l_i = (1 - eps) w[y_i] (-log p_i[y_i]) + (eps / C) sum_c w[c] (-log p_i[c])
    and the mean is  sum_i l_i / sum_i w[y_i]  (the sum of the targets' class weights: their count when every
    weight is 1; with all weights equal to any w, w cancels and the mean is the unweighted one). Returns numerator,
    denominator, loss and count."""
    x = np.asarray(logits, dtype=np.float64)
    y = np.asarray(targets, dtype=np.int64)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ReductionError(f"logits must be (n, C) and targets (n,), got {x.shape} and {y.shape}")
    C = x.shape[1]
    w = np.ones(C) if weight is None else np.asarray(weight, dtype=np.float64)
    if w.shape != (C,):
        raise ReductionError(f"weight must have one entry per class ({C}), got shape {w.shape}")
    valid = y != ignore_index
    if np.any((y[valid] < 0) | (y[valid] >= C)):
        raise ReductionError(f"targets outside [0, {C}) that are not ignore_index={ignore_index}")
    z = x - x.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    yv = y[valid]
    nll = -logp[valid, yv]
    smooth = -(logp[valid] * w).sum(axis=1)
    eps = float(label_smoothing)
    num = float(((1 - eps) * w[yv] * nll + eps / C * smooth).sum())
    den = float(w[yv].sum())
    return {"numerator": num, "denominator": den, "loss": num / den if den else float("nan"),
            "n_valid": int(valid.sum()), "n_ignored": int((~valid).sum())}


def cross_entropy_cases(n: int = 8, classes: int = 5, ignored=(1, 4), weight=(1.0, 2.0, 0.5, 3.0, 1.5),
                        label_smoothing: float = 0.1, equal_weight: float = 2.5, seed: int = 0) -> list[dict]:
    """Random float64 logits for `n` targets (`ignored` positions set to -100); for no options, weight=, the same
    weight `equal_weight` for every class, label_smoothing= and weight + label_smoothing: PyTorch's loss, the hand
    computation, its denominator, the valid count, and what dividing by the count instead would give. Also
    transformers' LabelSmoother (no class weights)."""
    import torch
    import torch.nn.functional as F
    from transformers.trainer_pt_utils import LabelSmoother

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, classes))
    y = rng.integers(0, classes, size=n)
    y[list(ignored)] = IGNORE_INDEX
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    wt = torch.tensor(weight, dtype=torch.float64)
    rows = []
    equal = torch.full((classes,), float(equal_weight), dtype=torch.float64)
    for name, kw in (("plain", {}), ("weight", {"weight": wt}), ("equal weights", {"weight": equal}),
                     ("label_smoothing", {"label_smoothing": label_smoothing}),
                     ("weight + label_smoothing", {"weight": wt, "label_smoothing": label_smoothing})):
        torch_loss = float(F.cross_entropy(xt, yt, ignore_index=IGNORE_INDEX, **kw))
        hand = cross_entropy_by_hand(x, y, weight=kw["weight"].numpy() if "weight" in kw else None,
                                     label_smoothing=kw.get("label_smoothing", 0.0))
        rows.append({"case": name, "torch": torch_loss, "by_hand": hand["loss"], "denominator": hand["denominator"],
                     "n_valid": hand["n_valid"], "n_ignored": hand["n_ignored"],
                     "divided_by_count": hand["numerator"] / hand["n_valid"],
                     "abs_diff": abs(torch_loss - hand["loss"])})
    ls = LabelSmoother(epsilon=label_smoothing)
    hf = float(ls({"logits": xt}, yt))
    hand = cross_entropy_by_hand(x, y, label_smoothing=label_smoothing)
    rows.append({"case": "transformers LabelSmoother", "torch": hf, "by_hand": hand["loss"],
                 "denominator": hand["denominator"], "n_valid": hand["n_valid"], "n_ignored": hand["n_ignored"],
                 "divided_by_count": hand["numerator"] / hand["n_valid"], "abs_diff": abs(hf - hand["loss"])})
    for r in rows:
        r["targets"] = [int(v) for v in y]
    return rows


