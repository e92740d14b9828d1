"""Metacontroller hooks implementing the disaggregatedset.x-k8s.io/v1 API."""
