"""The agent's execution: a cycle's plan in, writes out, every write fenced by the Lease check.

Layers (pyproject.toml's contract): ``plan`` (the whole plan) over the write paths ``evictions``,
``gates``, ``decisions``, ``resume`` (after a crash) and ``stamps`` (repairs, Volcano's preemptions),
over ``notices`` (eviction notices, given or acted on), over ``executor`` (fencing, fault hooks, the
write helpers, the books). ARCHITECTURE.md, "The agent's cycle", step 4.
"""
