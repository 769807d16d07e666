"""Certificates for the webhook: a CA and a serving certificate, and caBundle injection."""
