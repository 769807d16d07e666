"""The pure policy core: standard library only, no I/O, no clock (time is an argument)."""
