"""Upstream's revision hash, byte for byte: Go encoding/json and resource.Quantity."""
