"""Per-notebook tables, figures and verdicts on the papers' claims, kept out of the notebooks' cells."""
