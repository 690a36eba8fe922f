"""The asyncio shell around the sans-I/O core: clocks, the drive loop, backoff."""
