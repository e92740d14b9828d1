"""What every front end shares: Metacontroller's wire format and the package's version."""
