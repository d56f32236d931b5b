"""The e2e plugin's roles, one pytest plugin module each, registered by `e2e.plugin`:
options, collection, scheduling, reporting and the watchdog."""
