"""The method: count sketch, block sums, estimators, resampling and intervals, decomposition maths, gates,
orderings. numpy/torch only, no file I/O, no prose; imports nothing else of docgrad."""
