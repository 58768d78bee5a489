"""Helpers for test harnesses and the soak: servers of one's own that can be killed and restarted."""
