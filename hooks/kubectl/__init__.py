"""The kubectl plugin, `kubectl ds`: a set's rollouts through the user's own kubectl."""
