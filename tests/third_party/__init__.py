"""Third-party test code vendored into the test tree (see each file's header)."""
