"""The teaching pages' models: loss reduction (page 01) and its pitfalls in real setups (pages 01b, 01c)."""
