"""``volcano-elastic simulate``: a discrete-event simulator of Volcano and the elastic agent.

The agent's decisions come from the policy core itself (``policy.cycle.plan_cycle``), called on
snapshots built from the simulated cluster; this package only models what the cluster does.
"""
