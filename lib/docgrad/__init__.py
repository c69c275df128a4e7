"""docgrad: within-document gradient correlation of language models, measured and explained.

Modules (one concern each):
  reduction  loss-reduction objectives of the scalar teaching model, and accumulation checks
  models     the default SmolLM2 model (GGUF inside a PyPI wheel), pinned hub models, tiny test models
  corpora    the four offline corpora, their manifest, and loaders for the published corpora
  sketch     the count sketch of per-chunk gradients
  probe      per-chunk gradients -> sketched Gram matrices -> result files
  results    the result-file format (read, validate, write atomically)
  stats      estimators (S_cross, sigma2, rho, R(W), B_simple), document bootstrap, gates
  notebooks  executing the report's notebooks with validated parameters
  report     the self-contained HTML report
"""

__version__ = "0.1.0"
