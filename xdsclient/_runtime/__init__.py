"""The runtime every layer may use: the clock, the task owner, the paused collector."""
