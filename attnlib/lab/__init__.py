"""The lab: what writes and times, apart from the science (run, queue, timing, bench, machine, cli); it trains
what the plan of the runs (attnlib.analysis.plan) names.

It may import the core and the results side; nothing in the core imports it.
"""
