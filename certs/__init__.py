"""The webhook's certificates: a private CA, a serving certificate, and ``caBundle`` injection."""
