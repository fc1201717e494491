"""userturn: measure whether a chat model can write the next *user* turn."""

__version__ = "0.1.0"
