"""The offline corpora: building and selection, sources, provenance (sources of documents, the control)."""
