"""Observers: protocol events and what listens to them (stats, metrics, logs, CSDS)."""
