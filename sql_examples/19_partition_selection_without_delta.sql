-- title: Partition selection with δ
-- dataset: demo
-- session-budget: ApproxDP(10, 1e-5)
-- budget: epsilon=1.0, delta=1e-6
-- expect-mechanisms: 2
-- expect-partition: department, age
-- expect-query-cost: epsilon=1.0, delta=1e-6
-- expect-marginal: epsilon=1.0, delta=1e-6
-- why: department is public, age is not: the (department, age) groups need partition selection:
--      a count and a selection count over the same partition, ε/2 each, all of δ to the
--      selection.
SELECT department, age, COUNT(*) AS n FROM visits GROUP BY department, age
ORDER BY department, age;

-- title: The same without δ must be a clear refusal
-- budget: epsilon=1.0
-- expect-error: UnsupportedQueryError: delta=
-- why: In an (ε, δ) session epsilon= alone means δ = 0, and partition selection cannot run with
--      δ = 0 (a group that exists because of one visit must be released with probability at
--      most δ). Like the pure-ε case, the user should get an UnsupportedQueryError telling them
--      to pass delta=, and nothing is spent.
--      KNOWN ENGINE DISAGREEMENT: the engine raises InternalError ("partition selection needs
--      ε > 0 and δ > 0") — see tests/test_sql_examples.py, KNOWN_ENGINE_DISAGREEMENTS.
SELECT department, age, COUNT(*) AS n FROM visits GROUP BY department, age;
