"""Admission webhooks: mutate Pods of PyTorchJobs, validate PyTorchJobs.

``review`` (pure: AdmissionReview dict -> response dict), ``mutate`` and ``validate`` hold the
logic; ``app`` is the thin Flask layer; ``server``/``serve`` run it under gunicorn over TLS.
"""
