"""What the data plane's front ends (the gRPC channel, the httpx transport) share beyond the call
path: the TLS policy of a cluster and the certificates it uses."""
