-- title: Children
-- dataset: demo
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=0.5
-- why: The first query of the session pays its own cost.
SELECT COUNT(*) AS n FROM visits WHERE age < 18;

-- title: Seniors' mean length of stay (disjoint from the children: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=0.5
-- why: The general composition theorem across queries: a neighbouring pair pays only for the
--      mechanisms whose input it changes. A senior's visit is outside age < 18, a child's visit
--      outside age >= 65, so no visit pays both queries: the session total stays max(0.5, 0.5).
--      (Inside the query SUM and COUNT overlap: 0.25 each.)
--      KNOWN ENGINE DISAGREEMENT: explain/sql crash here with an IndexError in the solver's
--      worst-case description — see tests/test_sql_examples.py, KNOWN_ENGINE_DISAGREEMENTS.
SELECT AVG(length_of_stay) AS mean_los FROM visits WHERE age >= 65;

-- title: Adults' total cost (disjoint again: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=0.5
-- why: 18..64 is disjoint from both earlier regions: three queries for the price of one.
SELECT SUM(cost) AS total_cost FROM visits WHERE age BETWEEN 18 AND 64;

-- title: Hospital A (overlaps all three: pays)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=1.0
-- why: A visit to hospital A can be of any age, so it is in this region and in one of the
--      earlier ones: 0.5 + 0.5 = 1.0.
SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A';

-- title: Children in hospital B (overlaps only the first query: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- why: hospital = 'B' AND age < 18 is disjoint from hospital = 'A' and from the adult and senior
--      regions; its visits paid only 0.5 so far, so they can pay 0.5 more without raising the
--      session's worst case (1.0).
SELECT COUNT(*) AS n FROM visits WHERE hospital = 'B' AND age < 18;
