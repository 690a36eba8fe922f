"""Proxyless HTTP: an httpx transport routed, balanced and secured by xDS."""
