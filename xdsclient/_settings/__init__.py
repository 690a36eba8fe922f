"""Settings: configuration values, sources, bootstrap, options, listener templates."""
