"""What a mean over tokens weights: loss-reduction objectives, padding masks and gradient accumulation.

The scalar teaching model (seed 003)
------------------------------------
One real parameter theta (a logit); every position predicts class 1 with p = sigmoid(theta).
Position j of document i has label y_ij in {0, 1}; its cross-entropy in nats is

    l(theta, y) = -[y log p + (1 - y) log(1 - p)] = softplus(theta) - y * theta,

computed in that stable log-sigmoid form (softplus(t) = max(t, 0) + log1p(exp(-|t|))), and
dl/dtheta = p - y.

Every objective below is a weighted sum  L(theta) = sum_ij w_ij l(theta, y_ij)  with fixed weights, so

    dL/dtheta = sum_ij w_ij (p - y_ij),   and the optimum satisfies  p* = sum w_ij y_ij / sum w_ij

(the second derivative (sum w) p (1 - p) is positive for 0 < p < 1, so p* is the unique optimum when
0 < p* < 1; when p* is 0 or 1 the loss only approaches its infimum as theta -> -inf or +inf).

With n_i valid positions in document i, m_ij = 1 at valid positions and 0 at padding, N_pad the number of
positions in the padded tensor, and D documents, the five objectives are

    token_mean               w = m_ij / sum m              positions weigh equally: doc i gets n_i / sum n
    document_mean            w = m_ij / (D n_i)            documents weigh equally: doc i gets 1 / D
    padding_as_class0        w = 1 / N_pad                 padding enters as invented label-0 data
    padding_in_denominator   w = m_ij / N_pad              padding dropped from the numerator only
    label0_as_padding        w = [y_ij = 1] / #(y = 1)     every label 0 is mistaken for padding

Splitting a batch into K microbatches k = 1..K with n_k valid targets and per-microbatch mean gradients g_k:
the unweighted average (1/K) sum g_k is a different objective from the token mean, which needs
sum n_k g_k / sum n_k (= sum of per-microbatch *sums* divided by the total valid count, which transformers
passes to the loss as `num_items_in_batch`).

The PyTorch part repeats these with torch.nn.functional.cross_entropy and checks gradient accumulation on a
real (tiny, randomly initialised) causal language model, counting targets after the causal shift
(n tokens give n - 1 next-token targets) and with prompt positions masked by -100. A mask taken from a token id
(`pad_is_eos`: transformers' language-modelling collator with pad == EOS) drops real targets. The page's code
exercises are checked here too (`check_token_mean`, `check_normaliser`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from docgrad.errors import DocgradError
from docgrad.models import tiny_model

OBJECTIVES = ("token_mean", "document_mean", "padding_as_class0", "padding_in_denominator",
              "label0_as_padding")
OBJECTIVE_LABELS = {
    "token_mean": "token mean",
    "document_mean": "document mean",
    "padding_as_class0": "padding counted as class-0 data",
    "padding_in_denominator": "padding out of numerator, in denominator",
    "label0_as_padding": "label 0 treated as padding",
}
IGNORE_INDEX = -100  # PyTorch's default ignore_index, also what transformers uses for masked labels


class ReductionError(DocgradError, ValueError):
    """Invalid input to a loss reduction or another teaching computation (negative lengths, labels outside {0, 1},
    mismatched lists; the message says which and why)."""


class NoValidPositionsError(ReductionError):
    """A mean over valid positions has no valid position: its denominator is zero and it is undefined."""


# --------------------------------------------------------------------------------------------------
# The padded batch
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Batch:
    """Documents as rows of positions. `targets[i]` holds labels (padding positions hold `pad_label`);
    `mask[i]` is True at valid positions. Rows may have different lengths (each row is one document)."""

    targets: tuple[np.ndarray, ...]
    mask: tuple[np.ndarray, ...]

    @property
    def valid_counts(self) -> list[int]:
        return [int(m.sum()) for m in self.mask]

    @property
    def n_positions(self) -> int:
        return int(sum(len(t) for t in self.targets))

    @property
    def n_valid(self) -> int:
        return int(sum(self.valid_counts))


def check_int_list(name: str, values, allow_empty: bool = False) -> list[int]:
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError) as e:
        raise ReductionError(f"{name} must be a list of integers, got {values!r}") from e
    if any(o != v for o, v in zip(out, values)):
        raise ReductionError(f"{name} must be integers, got {list(values)!r}")
    if not out and not allow_empty:
        raise ReductionError(f"{name} is empty: at least one document is needed")
    return out


def _one_per_document(name: str, values, n_docs: int) -> list[int]:
    """`values` as integers, checked to hold exactly one entry for each of the n_docs documents."""
    values = check_int_list(name, values)
    if len(values) != n_docs:
        raise ReductionError(f"{name} must have one entry per document: got {len(values)} for {n_docs} documents")
    return values


def _reject_negative(name: str, values: list[int], what: str) -> None:
    for i, v in enumerate(values):
        if v < 0:
            raise ReductionError(f"{name}[{i}] = {v}: {what} cannot be negative")


def make_batch(lengths, labels, padding=None, pad_label: int = 0) -> Batch:
    """A batch of documents: document i has `lengths[i]` valid positions, all labelled `labels[i]`,
    followed by `padding[i]` padding positions (mask 0, target `pad_label`).

    padding=None pads every document to the longest one (the usual rectangular tensor).
    Errors: negative lengths or padding, labels outside {0, 1}, lists of different lengths.
    """
    lengths = check_int_list("lengths", lengths)
    labels = _one_per_document("labels", labels, len(lengths))
    _reject_negative("lengths", lengths, "a document's number of positions")
    for i, y in enumerate(labels):
        if y not in (0, 1):
            raise ReductionError(f"labels[{i}] = {y}: labels must be 0 or 1 in this binary model")
    if padding is None:
        longest = max(lengths)
        padding = [longest - n for n in lengths]
    padding = _one_per_document("padding", padding, len(lengths))
    _reject_negative("padding", padding, "a padding count")
    if pad_label not in (0, 1):
        raise ReductionError(f"pad_label must be 0 or 1, got {pad_label!r}")
    targets, mask = [], []
    for n, y, k in zip(lengths, labels, padding):
        targets.append(np.array([y] * n + [pad_label] * k, dtype=np.int64))
        mask.append(np.array([True] * n + [False] * k, dtype=bool))
    return Batch(tuple(targets), tuple(mask))


def objective_weights(batch: Batch, objective: str) -> list[np.ndarray]:
    """Per-position weights w_ij of an objective (see the module docstring), one array per document."""
    D = len(batch.targets)
    if objective == "token_mean":
        n = batch.n_valid
        if n == 0:
            raise NoValidPositionsError(
                "token mean over zero valid positions: the denominator sum(mask) is 0, so the mean is "
                "undefined (returning 0 would pretend the prediction is perfect)")
        return [m / n for m in batch.mask]
    if objective == "document_mean":
        empty = [i for i, c in enumerate(batch.valid_counts) if c == 0]
        if empty:
            raise NoValidPositionsError(
                f"document mean: document(s) {empty} have zero valid positions, so their mean loss L_i is "
                f"undefined; drop them or declare another policy explicitly")
        return [m / (D * m.sum()) for m in batch.mask]
    if objective == "padding_as_class0":
        N = batch.n_positions
        if N == 0:
            raise NoValidPositionsError("padding_as_class0: the batch has zero positions")
        return [np.full(len(t), 1.0 / N) for t in batch.targets]
    if objective == "padding_in_denominator":
        N = batch.n_positions
        if batch.n_valid == 0:
            raise NoValidPositionsError("padding_in_denominator: zero valid positions")
        return [m / N for m in batch.mask]
    if objective == "label0_as_padding":
        # the mask is (wrongly) derived from the label value: every 0, padding or real target, is dropped
        keep = [t != 0 for t in batch.targets]
        n = int(sum(k.sum() for k in keep))
        if n == 0:
            raise NoValidPositionsError("label0_as_padding: no position has label 1, so nothing is left")
        return [k / n for k in keep]
    raise ReductionError(f"unknown objective {objective!r}; expected one of {', '.join(OBJECTIVES)}")


# --------------------------------------------------------------------------------------------------
# Loss, gradient, optimum
# --------------------------------------------------------------------------------------------------

def softplus(t: float) -> float:
    """log(1 + e^t) without overflow."""
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


def sigmoid(t: float) -> float:
    """1 / (1 + e^-t) without overflow."""
    if t >= 0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


def logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def position_loss(theta: float, y: int) -> float:
    """Binary cross-entropy in nats of one position: softplus(theta) - y theta."""
    return softplus(theta) - y * theta


def loss(theta: float, batch: Batch, objective: str) -> float:
    """L(theta) = sum_ij w_ij (softplus(theta) - y_ij theta)."""
    sp = softplus(float(theta))
    total = 0.0
    for w, t in zip(objective_weights(batch, objective), batch.targets):
        total += float(np.sum(w * (sp - t * theta)))
    return total


def gradient(theta: float, batch: Batch, objective: str) -> float:
    """dL/dtheta = sum_ij w_ij (sigmoid(theta) - y_ij)."""
    p = sigmoid(float(theta))
    return float(sum(np.sum(w * (p - t)) for w, t in zip(objective_weights(batch, objective), batch.targets)))


@dataclass(frozen=True)
class Optimum:
    """Where dL/dtheta = 0. `finite` is False when p* is 0 or 1 (the loss decreases forever towards
    theta = -inf or +inf); then `theta` is +-inf."""

    p: float
    theta: float
    finite: bool

    def describe(self) -> str:
        if self.finite:
            return f"p = {self.p:.6g}"
        return f"no finite optimum (p -> {self.p:g} as theta -> {'+' if self.theta > 0 else '-'}inf)"


def optimum(batch: Batch, objective: str) -> Optimum:
    """p* = sum w y / sum w, the unique stationary point when 0 < p* < 1."""
    ws = objective_weights(batch, objective)
    sw = float(sum(w.sum() for w in ws))
    p = float(sum(np.sum(w * t) for w, t in zip(ws, batch.targets))) / sw
    if p <= 0.0:
        return Optimum(0.0, -math.inf, False)
    if p >= 1.0:
        return Optimum(1.0, math.inf, False)
    return Optimum(p, logit(p), True)


def objectives_table(batch: Batch, theta: float = 0.0) -> list[dict]:
    """One row per objective: loss and gradient at `theta`, the optimum, and the weight of each document."""
    rows = []
    for obj in OBJECTIVES:
        ws = objective_weights(batch, obj)
        opt = optimum(batch, obj)
        rows.append({
            "objective": obj,
            "label": OBJECTIVE_LABELS[obj],
            "loss": loss(theta, batch, obj),
            "gradient": gradient(theta, batch, obj),
            "optimum_p": opt.p if opt.finite else None,
            "optimum": opt.describe(),
            "finite_optimum": opt.finite,
            "document_weights": [float(w.sum()) for w in ws],
        })
    return rows


def loss_curves(batch: Batch, ps) -> list[dict]:
    """Long-format rows (objective, p, theta, loss) for plotting every objective against p."""
    rows = []
    for obj in OBJECTIVES:
        for p in ps:
            th = logit(float(p))
            rows.append({"objective": obj, "label": OBJECTIVE_LABELS[obj], "p": float(p), "theta": th,
                         "loss": loss(th, batch, obj)})
    return rows


# --------------------------------------------------------------------------------------------------
# Padding invariance, microbatch accumulation, finite differences
# --------------------------------------------------------------------------------------------------

def padding_invariance(lengths, labels, added=(0, 1, 6, 20), thetas=(-1.0, 0.0, 0.3),
                       objectives=("token_mean", "document_mean")) -> list[dict]:
    """Add `k` masked padding positions to every document and compare loss and gradient with the
    unpadded batch. Rows: objective, added, theta, abs_loss_diff, abs_grad_diff (both exactly 0 when the
    mask enters numerator and denominator)."""
    base = make_batch(lengths, labels, padding=[0] * len(lengths))
    rows = []
    for obj in objectives:
        for k in added:
            padded = make_batch(lengths, labels, padding=[k] * len(lengths))
            for th in thetas:
                rows.append({"objective": obj, "added": int(k), "theta": float(th),
                             "abs_loss_diff": abs(loss(th, padded, obj) - loss(th, base, obj)),
                             "abs_grad_diff": abs(gradient(th, padded, obj) - gradient(th, base, obj))})
    return rows


def microbatch_accumulation(lengths, labels, theta: float = 0.0) -> dict:
    """One document per microbatch. Returns each microbatch's valid count and mean gradient, their
    unweighted average, the count-weighted average, and the unsplit token-mean and document-mean gradients."""
    lengths = check_int_list("lengths", lengths)
    labels = check_int_list("labels", labels)
    means = []
    for n, y in zip(lengths, labels):
        mb = make_batch([n], [y], padding=[0])
        means.append(gradient(theta, mb, "token_mean"))
    full = make_batch(lengths, labels)
    return {
        "valid_counts": lengths,
        "microbatch_mean_gradients": means,
        "unweighted_average": sum(means) / len(means),
        "count_weighted_average": sum(n * g for n, g in zip(lengths, means)) / sum(lengths),
        "full_batch_token_mean": gradient(theta, full, "token_mean"),
        "full_batch_document_mean": gradient(theta, full, "document_mean"),
    }


def finite_difference_check(batch: Batch, objective: str = "token_mean", theta: float = 0.3,
                            h: float = 1e-5) -> dict:
    """Compare the analytic gradient with (L(theta + h) - L(theta - h)) / 2h."""
    analytic = gradient(theta, batch, objective)
    numeric = (loss(theta + h, batch, objective) - loss(theta - h, batch, objective)) / (2 * h)
    return {"objective": objective, "theta": theta, "h": h, "analytic": analytic, "numeric": numeric,
            "abs_error": abs(analytic - numeric)}


# --------------------------------------------------------------------------------------------------
# The same objectives in PyTorch
# --------------------------------------------------------------------------------------------------

def _torch_logits(theta, n: int):
    """Two-class logits [0, theta] per position, so softmax gives p = sigmoid(theta) for class 1."""
    import torch

    return torch.stack([torch.zeros(n, dtype=theta.dtype), theta.expand(n)], dim=1)


def torch_objectives(batch: Batch, theta: float = 0.0) -> list[dict]:
    """Each objective written with torch.nn.functional.cross_entropy (ignore_index, mean vs sum) in float64;
    loss and autograd gradient at theta. Rows: objective, how (the PyTorch expression), loss, gradient."""
    import torch
    import torch.nn.functional as F

    rows = []
    for obj in OBJECTIVES:
        th = torch.tensor(float(theta), dtype=torch.float64, requires_grad=True)
        flat_t = torch.from_numpy(np.concatenate(batch.targets))
        flat_m = torch.from_numpy(np.concatenate(batch.mask))
        logits = _torch_logits(th, len(flat_t))
        masked = torch.where(flat_m, flat_t, torch.full_like(flat_t, IGNORE_INDEX))
        if obj == "token_mean":
            how = "cross_entropy(logits, masked, ignore_index=-100)  # reduction='mean'"
            L = F.cross_entropy(logits, masked, ignore_index=IGNORE_INDEX)
        elif obj == "document_mean":
            how = "mean over documents of cross_entropy(doc_logits, doc_masked, ignore_index=-100)"
            per_doc, start = [], 0
            for t in batch.targets:
                sl = slice(start, start + len(t))
                per_doc.append(F.cross_entropy(logits[sl], masked[sl], ignore_index=IGNORE_INDEX))
                start += len(t)
            L = torch.stack(per_doc).mean()
        elif obj == "padding_as_class0":
            how = "cross_entropy(logits, targets)  # padding targets 0, nothing ignored"
            L = F.cross_entropy(logits, flat_t)
        elif obj == "padding_in_denominator":
            how = "cross_entropy(logits, masked, ignore_index=-100, reduction='sum') / logits.shape[0]"
            L = F.cross_entropy(logits, masked, ignore_index=IGNORE_INDEX, reduction="sum") / len(flat_t)
        else:
            how = "cross_entropy(logits, targets, ignore_index=0)  # label 0 used as the padding id"
            L = F.cross_entropy(logits, flat_t, ignore_index=0)
        L.backward()
        rows.append({"objective": obj, "how": how, "loss": float(L.detach()), "gradient": float(th.grad)})
    return rows


def all_ignored_comparison(n: int = 4) -> dict:
    """What each implementation does when every target is padding: PyTorch's mean reduction divides
    0 by 0 and returns NaN (sum returns 0); ours raises NoValidPositionsError."""
    import torch
    import torch.nn.functional as F

    logits = _torch_logits(torch.tensor(0.0, dtype=torch.float64), n)
    ignored = torch.full((n,), IGNORE_INDEX, dtype=torch.long)
    torch_mean = float(F.cross_entropy(logits, ignored, ignore_index=IGNORE_INDEX))
    torch_sum = float(F.cross_entropy(logits, ignored, ignore_index=IGNORE_INDEX, reduction="sum"))
    try:
        loss(0.0, make_batch([0], [1], padding=[n]), "token_mean")
        ours = "returned a value"
    except NoValidPositionsError as e:
        ours = f"NoValidPositionsError: {e}"
    return {"torch_mean": torch_mean, "torch_mean_is_nan": math.isnan(torch_mean), "torch_sum": torch_sum,
            "docgrad": ours}


# --------------------------------------------------------------------------------------------------
# Gradient accumulation on a causal language model
# --------------------------------------------------------------------------------------------------

def causal_lm_labels(input_ids, prompt_length: int = 0):
    """Labels for next-token training: a copy of input_ids with the first `prompt_length` positions set to
    -100 (not supervised). The model shifts internally: logits at t predict labels at t + 1."""
    labels = input_ids.clone()
    if prompt_length < 0 or prompt_length > len(input_ids):
        raise ReductionError(f"prompt_length must be in [0, {len(input_ids)}], got {prompt_length}")
    labels[:prompt_length] = IGNORE_INDEX
    return labels


def count_targets(labels) -> int:
    """Number of supervised next-token targets after the causal shift: labels[..., 1:] != -100.
    A document of n tokens without a prompt gives n - 1 targets; with a q-token prompt (q >= 1), n - q."""
    return int((labels[..., 1:] != IGNORE_INDEX).sum())


def make_documents(lengths, prompt_lengths=None, vocab_size: int = 256, seed: int = 0, tokens=None) -> list[dict]:
    """Token sequences of the given lengths, each with its labels and target count.

    tokens=None: random ids (a seeded stand-in for text: the algebra under test does not depend on what the
    tokens say). Otherwise `tokens` (a 1-D sequence of real token ids, e.g. a corpus span) is cut into
    consecutive documents of the given lengths, from its start."""
    import torch

    lengths = check_int_list("lengths", lengths)
    prompt_lengths = ([0] * len(lengths) if prompt_lengths is None
                      else _one_per_document("prompt_lengths", prompt_lengths, len(lengths)))
    if tokens is not None:
        tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long).reshape(-1)
        if int(sum(lengths)) > len(tokens):
            raise ReductionError(f"documents of {sum(lengths)} tokens in all cannot be cut from {len(tokens)} tokens")
    g = torch.Generator().manual_seed(seed)
    docs, start = [], 0
    for i, (n, k) in enumerate(zip(lengths, prompt_lengths)):
        if n < 2:
            raise ReductionError(f"lengths[{i}] = {n}: a document needs at least 2 tokens to give a "
                                 f"next-token target")
        if tokens is None:
            ids = torch.randint(0, vocab_size, (n,), generator=g)
        else:
            ids = tokens[start:start + n].clone()
            start += n
        labels = causal_lm_labels(ids, k)
        docs.append({"input_ids": ids, "labels": labels, "n_tokens": n, "prompt_length": k,
                     "n_targets": count_targets(labels)})
    return docs


def pad_batch(docs, pad_id: int = 0):
    """Right-pad documents into (input_ids, attention_mask, labels) tensors; padded labels are -100."""
    import torch

    T = max(d["n_tokens"] for d in docs)
    ids = torch.full((len(docs), T), pad_id, dtype=torch.long)
    att = torch.zeros((len(docs), T), dtype=torch.long)
    lab = torch.full((len(docs), T), IGNORE_INDEX, dtype=torch.long)
    for i, d in enumerate(docs):
        n = d["n_tokens"]
        ids[i, :n], att[i, :n], lab[i, :n] = d["input_ids"], 1, d["labels"]
    return ids, att, lab


def summed_loss(model, docs):
    """Sum of next-token cross-entropies over every supervised target of `docs` (one padded forward)."""
    import torch.nn.functional as F

    ids, att, lab = pad_batch(docs)
    logits = model(input_ids=ids, attention_mask=att).logits
    shift_logits = logits[:, :-1, :].reshape(-1, logits.shape[-1]).float()
    shift_labels = lab[:, 1:].reshape(-1)
    return F.cross_entropy(shift_logits, shift_labels, ignore_index=IGNORE_INDEX, reduction="sum")


def flat_grad(model):
    import torch

    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]).double()


def lm_accumulation(model, docs, microbatches=None) -> dict:
    """Gradient accumulation over K microbatches of documents on a causal LM, three ways:

      full      one batch, loss = (sum of all target losses) / N_total           (the token mean)
      averaged  (1/K) sum_k [ (sum of microbatch k's target losses) / n_k ]     (average of means)
      items     sum_k [ (sum of microbatch k's target losses) / N_total ]       (num_items_in_batch)

    `microbatches` lists document indices per microbatch (default: one document each). Targets are counted
    after the causal shift and without -100 positions. Returns counts, the three gradients' norms and the
    relative discrepancies |g - g_full| / |g_full|, and each microbatch's own mean loss.
    """
    if microbatches is None:
        microbatches = [[i] for i in range(len(docs))]
    counts = [sum(docs[i]["n_targets"] for i in mb) for mb in microbatches]
    for b, c in enumerate(counts):
        if c == 0:
            raise NoValidPositionsError(f"microbatch {b} has zero supervised targets after the causal shift")
    n_total = sum(counts)
    K = len(microbatches)

    def run(scale_of):
        model.zero_grad(set_to_none=True)
        losses = []
        for b, mb in enumerate(microbatches):
            s = summed_loss(model, [docs[i] for i in mb])
            (s * scale_of(b)).backward()
            losses.append(float(s.detach()))
        return flat_grad(model), losses

    model.zero_grad(set_to_none=True)
    full_loss = summed_loss(model, list(docs)) / n_total
    full_loss.backward()
    g_full = flat_grad(model)
    g_avg, sums = run(lambda k: 1.0 / (K * counts[k]))
    g_items, _ = run(lambda b: 1.0 / n_total)
    model.zero_grad(set_to_none=True)
    nf = float(g_full.norm())
    return {
        "n_tokens": [d["n_tokens"] for d in docs],
        "n_targets_per_document": [d["n_targets"] for d in docs],
        "targets_per_microbatch": counts,
        "n_targets_total": n_total,
        "loss_full_token_mean": float(full_loss.detach()),
        "loss_averaged_means": sum(s / (K * c) for s, c in zip(sums, counts)),
        "loss_num_items": sum(sums) / n_total,
        "loss_per_microbatch": [s_ / c for s_, c in zip(sums, counts)],
        "grad_norm_full": nf,
        "rel_discrepancy_averaged": float((g_avg - g_full).norm()) / nf,
        "rel_discrepancy_num_items": float((g_items - g_full).norm()) / nf,
        "cosine_averaged_full": float(g_avg @ g_full) / (float(g_avg.norm()) * nf),
    }


def microbatch_weights(counts) -> dict:
    """Weight each microbatch's targets receive: 1/K under the average of means, n_k / N under the token
    mean. Returns both, the per-target weight ratio max/min under averaging (n_max / n_min), and the total
    variation distance 0.5 sum_k |1/K - n_k/N| between the two weightings."""
    counts = check_int_list("counts", counts)
    if any(c <= 0 for c in counts):
        raise NoValidPositionsError(f"every microbatch needs at least one target, got counts {counts}")
    K, N = len(counts), sum(counts)
    return {"averaged": [1.0 / K] * K, "token_mean": [c / N for c in counts],
            "per_target_weight_ratio": max(counts) / min(counts),
            "total_variation": 0.5 * sum(abs(1.0 / K - c / N) for c in counts)}


def accumulation_growth(model, total_tokens: int = 128, ratios=(1, 2, 4, 8, 16, 32), prompt_length: int = 0,
                        seed: int = 0, vocab_size: int = 256, tokens=None) -> list[dict]:
    """How the average-of-means discrepancy grows as two microbatches' lengths become unequal.

    For each ratio r, two documents share `total_tokens` tokens with lengths in ratio ~ r : 1 (each >= 2);
    rows hold the lengths, target counts, the relative gradient discrepancy of averaged means and of the
    num_items normalisation (float noise) against the full-batch token mean, and the total-variation distance
    between the microbatch weightings. `tokens` (real token ids, see make_documents) replaces the random ids:
    the long document is the first `long` tokens, the short one the next `short`."""
    rows = []
    for r in ratios:
        short = max(2, round(total_tokens / (1 + r)))
        long_ = total_tokens - short
        docs = make_documents([long_, short], [prompt_length] * 2, vocab_size=vocab_size, seed=seed, tokens=tokens)
        acc = lm_accumulation(model, docs)
        w = microbatch_weights(acc["targets_per_microbatch"])
        rows.append({"ratio": float(r), "lengths": [long_, short],
                     "targets": acc["targets_per_microbatch"],
                     "target_ratio": w["per_target_weight_ratio"],
                     "rel_discrepancy_averaged": acc["rel_discrepancy_averaged"],
                     "rel_discrepancy_num_items": acc["rel_discrepancy_num_items"],
                     "total_variation": w["total_variation"],
                     "loss_token_mean": acc["loss_full_token_mean"], "loss_averaged_means": acc["loss_averaged_means"],
                     "loss_short": acc["loss_per_microbatch"][1], "loss_long": acc["loss_per_microbatch"][0]})
    return rows


def growth_bias_rows(rows: list[dict]) -> list[dict]:
    """The systematic part of averaging microbatch means, from accumulation_growth's rows (unequal lengths only):
    the average-of-means loss, the token-mean loss, their difference (the bias), and the two microbatches' own
    mean losses. Each document is its own sequence, so all of the short one's targets sit at early positions
    (little context); `effect` says which way up-weighting the short one moved the loss, only as measured:
    'raises' when its loss is the higher and the bias positive, 'lowers' when lower and negative, else ''."""
    out = []
    for r in rows:
        if r["lengths"][0] == r["lengths"][1]:
            continue
        d = r["loss_averaged_means"] - r["loss_token_mean"]
        higher = r["loss_short"] > r["loss_long"]
        out.append({"long_tokens": int(r["lengths"][0]), "short_tokens": int(r["lengths"][1]),
                    "loss_averaged_means": r["loss_averaged_means"], "loss_token_mean": r["loss_token_mean"],
                    "bias": d, "loss_short": r["loss_short"], "loss_long": r["loss_long"],
                    "effect": "raises" if higher and d > 0 else "lowers" if not higher and d < 0 else ""})
    return out


def probability_targets_mean(logits, classes, weight=None) -> dict:
    """torch cross_entropy's mean for the same targets given as class indices and as probabilities (one-hot),
    with optional class weights: for indices it divides by the sum of the targets' class weights (the count of
    non-ignored targets without weights); for probability targets by the number of rows N, weights or not."""
    import torch
    import torch.nn.functional as F

    x = torch.as_tensor(logits, dtype=torch.float64)
    y = torch.as_tensor(classes, dtype=torch.long)
    w = None if weight is None else torch.as_tensor(weight, dtype=torch.float64)
    onehot = F.one_hot(y, x.shape[1]).to(torch.float64)
    per_row = -(onehot * F.log_softmax(x, dim=1) * (w if w is not None else 1.0)).sum(dim=1)
    return {"indices": float(F.cross_entropy(x, y, weight=w)), "probabilities": float(F.cross_entropy(x, onehot, weight=w)),
            "weighted_sum": float(per_row.sum()), "n_rows": int(x.shape[0]),
            "sum_of_target_weights": float(w[y].sum()) if w is not None else float(len(y))}



# --------------------------------------------------------------------------------------------------
# A mask from a token id: pad == EOS
# --------------------------------------------------------------------------------------------------

def word_tokenizer(words, eos: str = "<eos>"):
    """A word-level tokenizer over `words` (split on spaces) whose pad token is its EOS token, as
    `tokenizer.pad_token = tokenizer.eos_token` makes a tokenizer that has no pad token of its own."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(dict.fromkeys([eos, "<unk>", *words]))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token=eos, unk_token="<unk>")


def pad_is_eos(texts) -> dict:
    """Each text + EOS, collated into one right-padded batch by transformers' DataCollatorForLanguageModeling
    (mlm=False) and by TRL's DataCollatorForLanguageModeling, with a tokenizer whose pad token is its EOS token.
    transformers masks the labels by token id (labels == pad_token_id -> -100), so every real EOS label is dropped
    with the padding; TRL pads the labels with -100 by position. Returns the tokens, both label rows, and per
    collator the real EOS labels kept and the targets counted after the shift."""
    import torch
    from transformers import DataCollatorForLanguageModeling
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling as TRLCollator

    texts = [str(t) for t in texts]
    if len(texts) < 2 or any(not t.split() for t in texts):
        raise ReductionError(f"pad_is_eos needs at least two non-empty texts, got {texts!r}")
    tok = word_tokenizer([w for t in texts for w in t.split()])
    eos = tok.eos_token_id
    feats = [{"input_ids": tok(t, add_special_tokens=False)["input_ids"] + [eos]} for t in texts]
    hf = DataCollatorForLanguageModeling(tokenizer=tok, mlm=False)(feats)
    trl = TRLCollator(pad_token_id=eos)(feats)
    if not torch.equal(hf["input_ids"], trl["input_ids"]):
        raise ReductionError("the two collators padded the input ids differently")
    lengths = [len(f["input_ids"]) for f in feats]
    real_eos = [(r, n - 1) for r, n in enumerate(lengths)]          # each text's own EOS position

    def summary(labels):
        return {"labels": labels.tolist(), "real_eos_labels_kept": sum(int(labels[r, t] != IGNORE_INDEX)
                                                                        for r, t in real_eos),
                "targets": count_targets(labels)}

    return {"tokens": [tok.convert_ids_to_tokens(row) for row in hf["input_ids"].tolist()],
            "lengths": lengths, "pad_token_id": tok.pad_token_id, "eos_token_id": eos, "n_real_eos": len(real_eos),
            "transformers": summary(hf["labels"]), "trl": summary(trl["labels"]),
            "targets_by_position": sum(n - 1 for n in lengths)}


# --------------------------------------------------------------------------------------------------
# Code exercises: a student's function against the library's answer
# --------------------------------------------------------------------------------------------------

CHECK_TOLERANCE = 1e-5        # relative gradient difference a correct answer stays below (float32 rounding)


def checked(rel: float, what: str, reference: str = "the full-batch token mean", hint: str = "") -> dict:
    """A checker's verdict: passed when the relative difference `rel` from the reference is below CHECK_TOLERANCE."""
    ok = bool(rel < CHECK_TOLERANCE)
    msg = (f"correct: {what} matches {reference} (relative difference {rel:.1e})" if ok
           else f"not yet: {what} differs from {reference} by {rel:.3g} of its norm (a correct answer stays below "
                f"{CHECK_TOLERANCE:g})" + (f"; {hint}" if hint else ""))
    return {"passed": ok, "rel_diff": rel, "message": msg}


def full_batch_gradient(model, docs):
    """(flat gradient, loss) of the token mean over every target of `docs` in one padded batch (the model's own
    loss: it shifts the labels and ignores -100)."""
    ids, att, lab = pad_batch(docs)
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
    loss.backward()
    g = flat_grad(model)
    model.zero_grad(set_to_none=True)
    return g, float(loss.detach())


def exercise_setup(lengths, seed: int = 0, prompt_lengths=None):
    """A tiny random Llama, documents of these lengths and their full-batch token-mean gradient."""
    model = tiny_model("llama", seed=seed)
    docs = make_documents(lengths, prompt_lengths, seed=seed + 1)
    g_full, _ = full_batch_gradient(model, docs)
    return model, docs, g_full


def token_mean_cases(seed: int = 0) -> list[dict]:
    """The batches the token-mean checker tries: per-position losses (rows x positions, float64, non-zero
    everywhere, as cross_entropy(reduction='none') gives without ignore_index) and labels (-100 where nothing is
    supervised: padding, a prompt). The last case has no supervised position."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def losses(rows, T):
        return 0.5 + 2.5 * torch.rand((rows, T), generator=g, dtype=torch.float64)

    def labels(rows, T, masked):
        lab = torch.randint(0, 5, (rows, T), generator=g)
        for r, cols in masked.items():
            lab[r, cols] = IGNORE_INDEX
        return lab

    return [
        {"case": "right padding", "losses": losses(3, 8),
         "labels": labels(3, 8, {0: slice(5, 8), 2: slice(2, 8)})},
        {"case": "a prompt and padding", "losses": losses(2, 10),
         "labels": labels(2, 10, {0: slice(0, 4), 1: [0, 1, 8, 9]})},
        {"case": "one row, nothing masked", "losses": losses(1, 6), "labels": labels(1, 6, {})},
        {"case": "no supervised position", "losses": losses(2, 4), "labels": labels(2, 4, {0: slice(0, 4),
                                                                                          1: slice(0, 4)})},
    ]


def _token_mean_bugs(losses, mask) -> dict:
    """What the usual mistakes return on one batch (page 01's objectives, in tensor form)."""
    rows = [(losses[r] * mask[r]).sum() / mask[r].sum() for r in range(losses.shape[0]) if mask[r].any()]
    return {"it divides by every position and keeps the padding's losses (padding counted as data)": losses.mean(),
            "the mask is in the numerator only (the padded positions stay in the denominator)":
                (losses * mask).sum() / losses.numel(),
            "it averages the rows' means (the document mean, not the token mean)": sum(rows) / len(rows)}


def check_token_mean(token_mean, seed: int = 0) -> dict:
    """Checker of page 01's code exercise. `token_mean(losses, labels)` gets per-position losses and labels
    (-100 where nothing is supervised) and must return sum(m * losses) / sum(m) with m = (labels != -100), and
    raise an error when sum(m) = 0. Returns passed, a message naming the first wrong case (and the usual mistake
    it matches), and one row per case."""
    import torch

    rows, first_wrong = [], None
    for c in token_mean_cases(seed):
        mask = (c["labels"] != IGNORE_INDEX).to(torch.float64)
        try:
            got = token_mean(c["losses"].clone(), c["labels"].clone())
            got = float(got)
        except Exception as e:                       # the student's function may raise anything
            got = f"raised {type(e).__name__}"
        if mask.sum() == 0:
            ok = isinstance(got, str)
            want = "an error (0/0)"
            why = "" if ok else (f"it returned {got} for a batch without a supervised position; a mean over zero "
                                 f"targets is undefined: raise an error (page 01, section 3)")
        else:
            want = float((c["losses"] * mask).sum() / mask.sum())
            ok = not isinstance(got, str) and abs(got - want) <= 1e-9 * abs(want)
            why = ""
            if not ok and not isinstance(got, str):
                why = next((b for b, v in _token_mean_bugs(c["losses"], mask).items()
                            if abs(got - float(v)) <= 1e-9 * abs(float(v))), "")
            elif not ok:
                why = f"it {got} on a batch that has supervised positions"
        rows.append({"case": c["case"], "expected": want, "got": got, "ok": ok})
        if not ok and first_wrong is None:
            first_wrong = (c["case"], want, got, why)
    if first_wrong is None:
        return {"passed": True, "rows": rows,
                "message": f"correct: the masked token mean on all {len(rows)} batches, and an error for the one "
                           f"without a supervised position"}
    case, want, got, why = first_wrong
    return {"passed": False, "rows": rows,
            "message": f"not yet: on the batch '{case}' the answer is "
                       f"{want if isinstance(want, str) else f'{want:.6g}'}, got "
                       f"{got if isinstance(got, str) else f'{got:.6g}'}" + (f": {why}" if why else "")}


NORMALISER_DOCS = {"lengths": (40, 9, 23, 14), "prompt_lengths": (5, 0, 3, 0), "microbatches": ((0, 1), (2,), (3,))}


def _normaliser_bugs(labels, k) -> dict:
    """The divisors of the usual mistakes for microbatch k."""
    K = len(labels)
    own = int((labels[k][..., 1:] != IGNORE_INDEX).sum())
    return {"each microbatch's own target count (then the step sums K microbatch means)": own,
            "its own count times the number of microbatches (a mean of microbatch means)": own * K,
            "the labels != -100 of all microbatches, position 0 of every row included (what transformers 4.46.2 "
            "to 5.9.0 passed)": int(sum(int((lab != IGNORE_INDEX).sum()) for lab in labels)),
            "every position of the padded tensors": int(sum(lab[..., 1:].numel() for lab in labels))}


def check_normaliser(divisor, seed: int = 0, setup=NORMALISER_DOCS) -> dict:
    """Checker of page 01a's code exercise. `divisor(labels, k)` gets the label tensors of all K microbatches
    of one optimiser step (rows x positions, -100 at prompts and padding) and returns the number microbatch k's
    summed next-token loss must be divided by. Each microbatch's summed loss / divisor is back-propagated on a tiny
    causal LM and the accumulated gradient compared with the full batch's token mean."""
    model, docs, g_full = exercise_setup(setup["lengths"], seed, setup["prompt_lengths"])
    groups = [[docs[i] for i in mb] for mb in setup["microbatches"]]
    labels = [pad_batch(g)[2] for g in groups]
    model.zero_grad(set_to_none=True)
    given = []
    for k, g in enumerate(groups):
        d = divisor([lab.clone() for lab in labels], k)
        given.append(float(d))
        if not math.isfinite(given[-1]) or given[-1] <= 0:
            model.zero_grad(set_to_none=True)
            return {"passed": False, "rel_diff": None, "divisors": given,
                    "message": f"not yet: microbatch {k}'s divisor is {d}; it must be a positive number"}
        (summed_loss(model, g) / given[-1]).backward()
    g = flat_grad(model)
    model.zero_grad(set_to_none=True)
    rel = float((g - g_full).norm() / g_full.norm())
    hint = ""
    for k, d in enumerate(given):
        hint = next((f"microbatch {k}'s divisor {d:g} is {b}" for b, v in _normaliser_bugs(labels, k).items()
                     if d == v), "")
        if hint:
            break
    out = checked(rel, "the accumulated gradient", hint=hint)
    return {**out, "divisors": given,
            "targets_per_microbatch": [int((lab[..., 1:] != IGNORE_INDEX).sum()) for lab in labels]}
