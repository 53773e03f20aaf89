"""rewrite

Privacy: the engine runs only statements made from the plan; the outer query reads noisy tables.
"""
