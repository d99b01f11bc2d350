"""The analysis of saved results (issue 32): the claims ledger (claims, rules), the statistics (stats: Welch,
Holm, the paired test) and the published figures (literature). It reads runs through `attnlib.results` only:
nothing here imports the trainer, data loading or the lab."""
