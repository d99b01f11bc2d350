"""The lab: what writes, times and plans, apart from the science (run, queue, timing, bench, machine, plan, cli).

It may import the core and the results side; nothing in the core imports it.
"""
