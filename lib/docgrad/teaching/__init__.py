"""The teaching pages' models: loss reduction (page 01) and its pitfalls in real setups (page 01b)."""
