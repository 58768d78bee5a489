"""Staging, the hand-off from process to commit: its keys (layout), the seal's format, the store that writes and
reads it, and the claims that give each processing try an attempt of its own."""
