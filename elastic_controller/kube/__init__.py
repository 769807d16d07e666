"""API access: the only package that imports the Kubernetes client (ARCHITECTURE.md, "Layers")."""
