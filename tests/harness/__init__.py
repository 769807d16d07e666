"""The test harness: every helper shared by more than one test module, or by a test module and a
benchmark, lives here and nowhere else.

Rules (checked by tests/unit/test_import_cycles.py):
- a ``test_*`` module is never imported by another module: what two tests share moves here;
- this package imports no test tier (tests/unit, integration, e2e, real);
- ``bench/`` may import this package (object builders, our stack on a box), never a test module.

By what a module sets up:
- objects and inputs: ``builders`` (Kubernetes JSON), ``kubeflow`` (PyTorchJob manifests),
  ``webhook_objects`` (AdmissionReviews), ``examples`` (the bundled plan examples), ``strategies``
  (hypothesis clusters), ``oracles`` (brute-force optima), ``validator_parity``, ``dockerfile``,
  ``fakego`` (a stand-in ``go`` for hack/build-binaries.sh);
- the in-memory API server (unit tier): ``fakecluster``, ``agentworld``, ``noticeworld``,
  ``executeworld``, ``controllerworld``, ``statuscli``; the simulator's one-node world:
  ``simworld``; the webhook served for real:
  ``webhookserver``;
- the rendered manifests and chart: ``manifests`` (and the checks every rendering passes), ``chart``;
- a box (integration, e2e, real): ``boxfixtures`` (the tiers' fixtures), ``required`` (a tier that
  cannot run fails or skips), ``waiting``, ``helmbox``, ``appliedbox``, ``agentbox``,
  ``tenantbox`` (acting with real ServiceAccount tokens), ``controllerbox``, ``stack`` and
  ``capacity_scenarios`` (our stack and its stories, e2e), ``realstack`` (the chart installed on real nodes).
"""
