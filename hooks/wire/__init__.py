"""What every front end shares: Metacontroller's wire format."""
