-- title: Children
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- why: Region: age < 18 (ages 0..17).
SELECT COUNT(*) AS n FROM visits WHERE age < 18;

-- title: NOT (age < 18) is disjoint from age < 18
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: Under three-valued logic NOT (age < 18) is TRUE iff age >= 18 AND age IS NOT NULL: the
--      FALSE-set of age < 18, not the complement of its TRUE-set. Disjoint from the first query.
SELECT COUNT(*) AS n FROM visits WHERE NOT (age < 18);

-- title: Expensive visits
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: cost > 5000 overlaps both age regions: 1 + 1.
SELECT COUNT(*) AS n FROM visits WHERE cost > 5000;

-- title: NOT (cost > 5000): NULL costs are in neither
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=2.0
-- why: NOT (cost > 5000) is cost <= 5000 AND cost IS NOT NULL: disjoint from cost > 5000, so a
--      visit still pays one age query and one cost query: 2.
SELECT COUNT(*) AS n FROM visits WHERE NOT (cost > 5000);

-- title: cost IS NULL: the records the two cost queries left out
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=2.0
-- why: A visit with a NULL cost is in neither cost > 5000 nor NOT (cost > 5000) (both UNKNOWN),
--      so it had paid only its age query (1): 1 + 1 = 2, free. A naive analyzer that took
--      NOT p as the complement of p would have put NULLs in the second query and charged 1.
SELECT COUNT(*) AS n FROM visits WHERE cost IS NULL;

-- title: cost IS NOT NULL overlaps the cost queries
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=3.0
-- why: Every visit with a cost is in one of the two cost queries and one age query: 3.
SELECT COUNT(*) AS n FROM visits WHERE NOT (cost IS NULL);
