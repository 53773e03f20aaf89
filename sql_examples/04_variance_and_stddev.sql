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

-- title: Standard deviation of cost is refused (sum of squares would overflow)
-- budget: epsilon=0.5
-- expect-error: UnsupportedQueryError: 2^62
-- why: cost is summed on a 0.01 grid, so its squares reach 2,000,000² = 4·10^12 per row; the
--      engine refuses any exact sum that could leave 64-bit integers (it assumes up to 2^40
--      rows) rather than risk a wrong sensitivity. Nothing is spent. Fix: declare a coarser
--      `resolution` for cost (e.g. 1) or tighter bounds.
SELECT STDDEV(cost) AS sd_cost FROM visits;
