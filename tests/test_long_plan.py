"""The long runs' plan (attnlib.analysis.plan.LONG_PLAN) says what each run buys: the claims of the ledger it informs."""

from attnlib.analysis import claims, plan


def test_every_planned_run_names_claims_of_the_ledger():
    keys = {c.key for c in claims.CLAIMS}
    for run, informs in plan.LONG_PLAN.items():
        assert informs and set(informs) <= keys, run
        assert len(set(informs)) == len(informs), run


def test_a_planned_run_names_every_claim_whose_evidence_reads_it():
    """Where a claim's verdict reads a planned run (claims.EVIDENCE), the plan names that claim for it, the
    session-13 rows included (centres_grid, quadratic_vs_learned, content_shift_heads, ha_layers_differ)."""
    named = set()
    for key, (experiments, _) in claims.EVIDENCE.items():
        for run in set(experiments) & set(plan.LONG_PLAN):
            assert key in plan.LONG_PLAN[run], (run, key)
            named.add(key)
    assert {"centres_grid", "quadratic_vs_learned", "content_shift_heads", "ha_layers_differ"} <= named
