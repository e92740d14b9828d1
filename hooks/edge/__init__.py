"""The edges: HTTP app and server, command line, wire format, manifests, CRD generation."""
