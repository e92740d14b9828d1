"""The hook server: the Flask app Metacontroller calls, under gunicorn (`python -m hooks serve`)."""
