-- title: Bed-days and mean age per department
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: department
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1/3 | epsilon=1/3 | epsilon=1/3
-- expect-marginal: epsilon=1.0
-- why: Three released sums per group: SUM(length_of_stay), and AVG(age) = SUM(age) / COUNT(age).
--      Inside one group a visit changes all three (their regions overlap), so ε is split three
--      ways, ε/3 each; across groups the partition makes it parallel (one group's cost).
SELECT department, SUM(length_of_stay) AS bed_days, AVG(age) AS mean_age
FROM visits GROUP BY department ORDER BY department;

-- title: Mean cost per hospital, and cost per visit
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1/3 | epsilon=1/3 | epsilon=1/3
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: AVG(cost) uses SUM(cost) and COUNT(cost) (visits with a cost), while SUM(cost) / COUNT(*)
--      divides by all visits: COUNT(*) is a third mechanism. All three overlap inside a group:
--      ε/3 each. The arithmetic is post-processing of noisy values (free). The hospital
--      partition is not disjoint from the department partition: +1.
SELECT hospital, AVG(cost) AS mean_cost, SUM(cost) / COUNT(*) AS cost_per_visit
FROM visits GROUP BY hospital ORDER BY hospital;
