"""The watch layer: watchers, the registry, configuration watches and the walk."""
