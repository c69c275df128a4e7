"""The teaching pages' models: loss reduction (page 01) and where it goes wrong in real setups (pages 01b-01d),
one module per page topic."""
