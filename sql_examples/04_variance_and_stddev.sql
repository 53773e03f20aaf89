-- title: Spread of age by sex
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: sex
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=1/3 | epsilon=1/3 | epsilon=1/3
-- expect-marginal: epsilon=1.0
-- why: VAR_POP(age) and STDDEV_SAMP(age) are both derived from the same three released values:
--      SUM(age²), SUM(age) and COUNT(age) (computed once, shared). They overlap: ε/3 each. The
--      sex groups (public values F, M) form a partition: one group's cost.
SELECT sex, VAR_POP(age) AS var_age, STDDEV_SAMP(age) AS sd_age
FROM visits GROUP BY sex ORDER BY sex;

-- title: Length of stay in oncology: mean, variance, standard deviation
-- budget: epsilon=0.6
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=0.6
-- expect-mechanism-costs: epsilon=0.2 | epsilon=0.2 | epsilon=0.2
-- expect-marginal: epsilon=0.6
-- expect-total: epsilon=1.6
-- why: VARIANCE (sample), STDDEV_POP and AVG of one column need SUM(x²), SUM(x) and COUNT(x):
--      three mechanisms with the region department = 'oncology' AND length_of_stay IS NOT NULL,
--      ε/3 = 0.2 each. An oncology visit is also in one sex group of the first query: +0.6.
SELECT VARIANCE(length_of_stay) AS var_los, STDDEV_POP(length_of_stay) AS sd_los,
       AVG(length_of_stay) AS mean_los
FROM visits WHERE department = 'oncology';

-- title: Standard deviation of cost (squares on a coarser grid)
-- budget: epsilon=0.6
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=0.6
-- expect-mechanism-costs: epsilon=0.2 | epsilon=0.2 | epsilon=0.2
-- expect-marginal: epsilon=0.6
-- expect-total: epsilon=2.2
-- why: STDDEV(cost) releases SUM(cost), COUNT(cost) and SUM(cost²), ε/3 each (they overlap).
--      Squares must stay exact in 64-bit integers for up to 2^40 rows, so SUM(cost²) uses a
--      coarser grid (cost rounded to 10, at most 2^11 steps) than SUM(cost) (0.01). A visit
--      with a cost is in all three and in the first two queries too: 1 + 0.6 + 0.6 = 2.2.
-- oracle: SELECT SQRT((SUM(POWER(ROUND_EVEN(LEAST(GREATEST(cost, 0), 20000) / 10, 0) * 10, 2))
--      / COUNT(cost) - POWER(SUM(ROUND(LEAST(GREATEST(cost, 0), 20000), 2)) / COUNT(cost), 2))
--      * COUNT(cost) / (COUNT(cost) - 1)) AS sd_cost FROM visits
SELECT STDDEV(cost) AS sd_cost FROM visits;
