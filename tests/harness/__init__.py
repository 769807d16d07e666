"""The test harness: every helper shared by more than one test module, or by a test module and a
benchmark, lives here and nowhere else.

Rules (checked by tests/unit/test_import_cycles.py):
- a ``test_*`` module is never imported by another module: what two tests share moves here;
- this package imports no ``test_*`` module;
- ``bench/`` may import this package (object builders, our stack on a box), never a test module.

Modules: ``builders`` (Kubernetes JSON objects), ``fakecluster`` (the in-memory API server as unit
tests use it), ``boxfixtures`` (pytest fixtures of the box tiers), ``waiting``, ``kubeflow``,
``helmbox``, ``oracles``, ``webhook_objects``, and one module per shared world or stack named after
what it sets up.
"""
