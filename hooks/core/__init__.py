"""The reconcile core: pure functions from parsed requests to typed answers."""
