-- title: PUMS: number of respondents
-- dataset: pums
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- why: The PUMS sample (SmartNoise metadata, row_privacy: True): one row per person, add/remove.
--      One global count, ε = 0.5.
SELECT COUNT(*) AS n FROM PUMS.PUMS;

-- title: PUMS: total and mean income, mean age
-- budget: epsilon=1.0
-- expect-mechanisms: 4
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-mechanism-costs: epsilon=0.25 | epsilon=0.25 | epsilon=0.25 | epsilon=0.25
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=1.5
-- why: SUM(income) (shared by the total and the mean), COUNT(income), SUM(age), COUNT(age): four
--      overlapping mechanisms, ε/4 each. income is clamped to [0, 500000] (sensitivity 500000),
--      age to [0, 100].
SELECT SUM(income) AS total_income, AVG(income) AS mean_income, AVG(age) AS mean_age
FROM PUMS.PUMS;

-- title: PUMS: spread of age
-- budget: epsilon=0.6
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=0.6
-- expect-mechanism-costs: epsilon=0.2 | epsilon=0.2 | epsilon=0.2
-- expect-marginal: epsilon=0.6
-- expect-total: epsilon=2.1
-- why: VAR_SAMP and STDDEV_POP of age share SUM(age²), SUM(age), COUNT(age): ε/3 each. These are
--      new releases (a new ε), although SUM(age) and COUNT(age) were released before: each query
--      draws fresh noise.
SELECT VAR_SAMP(age) AS var_age, STDDEV_POP(age) AS sd_age FROM PUMS.PUMS;
