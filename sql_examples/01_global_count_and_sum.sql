-- title: How many visits are there?
-- dataset: demo
-- session-budget: PureDP(10)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=1.0
-- why: One global COUNT(*) is one mechanism over the whole table (no WHERE: its region is the
--      whole record domain). Adding or removing any visit changes it by 1, so the discrete
--      Laplace noise is calibrated to sensitivity 1 and it costs the whole ε = 1.
SELECT COUNT(*) AS n FROM visits;

-- title: Count and total bed-days in one query
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.5 | epsilon=0.5
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: COUNT(*) (region: everything) and SUM(length_of_stay) (region: length_of_stay IS NOT
--      NULL) overlap, so one visit can change both: sequential composition. The query's ε = 1 is
--      split ε/2 + ε/2 so that the composed cost is ε. The SUM clamps every value to the declared
--      bounds [0, 30] (sensitivity 30). Every record of the first query's region is also in this
--      one, so the session total grows by the full 1.0 (1 + 0.5 + 0.5 = 2).
SELECT COUNT(*) AS n, SUM(length_of_stay) AS bed_days FROM visits;

-- title: Total and average cost
-- budget: epsilon=0.5
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-mechanism-costs: epsilon=0.25 | epsilon=0.25
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- why: AVG(cost) is SUM(cost) / COUNT(cost): two mechanisms, and the SUM(cost) of the select
--      list is the same released value (computed once, reused for free as post-processing). Both
--      have the region cost IS NOT NULL, so they overlap: ε/2 each. cost is a float: sums are
--      taken on the 0.01 grid after clamping to [0, 20000] (the outliers above 20000 count as
--      20000). A visit with a cost is in every earlier region, so the total becomes 2.5.
SELECT SUM(cost) AS total_cost, AVG(cost) AS mean_cost FROM visits;
