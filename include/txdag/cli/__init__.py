"""The txdag command: main.py parses, one module per command group runs."""
