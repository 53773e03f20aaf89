"""analysis

Privacy: regions over-approximate TRUE-sets; anything not understood is the whole domain.
"""
