"""accounting

Privacy: every cost computed here is at least the true loss it describes: rounded up, never down.
"""
