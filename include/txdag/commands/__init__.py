"""The ``txdag`` CLI's commands, one module per area; ``txdag.cli`` parses the arguments and dispatches here."""
