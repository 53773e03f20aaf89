"""Planning: from a query's text, the policy and the schema to what is charged and what the
engine runs, before anything is charged (no private row is read here).

Privacy: before the charge, this reads text, policy, schema and public tables, never a private row.
"""
