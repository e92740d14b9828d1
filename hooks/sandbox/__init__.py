"""The sandbox: a real control plane on 127.0.0.1 with the kit installed."""
