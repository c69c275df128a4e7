"""The teaching pages' models: loss reduction (pages 01 and 01a) and where it goes wrong in real setups (pages
01b-01d), one module per page topic."""
