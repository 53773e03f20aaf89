"""What privplan shows: HTML reprs, plots, progress bars and a session's own views."""
