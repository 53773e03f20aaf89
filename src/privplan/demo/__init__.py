"""Deterministic synthetic demo data (hospital visits) and its privacy policy."""
