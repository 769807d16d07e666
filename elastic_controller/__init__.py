"""volcano-elastic: elastic PyTorchJobs on the Volcano scheduler."""

__version__ = "0.1.0"
