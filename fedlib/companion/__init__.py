"""The companion to the papers: the records store, the papers' plans, claims, tables and figures,
the verdicts, reports, the campaign and its backends. The library (``fedlib`` outside this package)
never imports it."""
