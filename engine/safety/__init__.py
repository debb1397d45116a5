"""Keeping secrets and untrusted text in their place: redaction, untrusted-input checks, the user's own traceback frames."""
