"""The asyncio shell around the sans-I/O core: clocks, the drive loop of any stream protocol,
the task owner, and the pool (its pure authority part, its channels, their observer reports)."""
