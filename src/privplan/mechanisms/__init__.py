"""mechanisms

Privacy: released values get exact integer noise calibrated to their sensitivity (OS CSPRNG).
"""
