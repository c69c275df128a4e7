"""Result files: the format, pooling into cells, the analysis of cells and its cache, published numbers."""
