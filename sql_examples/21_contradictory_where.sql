-- title: Children
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: Region age < 18.
SELECT COUNT(*) AS n FROM visits WHERE age < 18;

-- title: A WHERE that is never TRUE reads nothing and costs nothing
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: age < 18 AND age >= 65 is empty: the mechanism's input f(D) = {} for every database, so
--      no neighbouring pair changes it and by the general theorem it costs 0 (its answer is
--      noise around 0). privplan should answer it for free (or refuse it clearly).
--      KNOWN ENGINE DISAGREEMENT: the planner raises InternalError("zero budget share for
--      COUNT(*)") — see tests/test_sql_examples.py, KNOWN_ENGINE_DISAGREEMENTS.
SELECT COUNT(*) AS n FROM visits WHERE age < 18 AND age >= 65;
