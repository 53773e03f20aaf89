-- title: Visits per age band (CASE key with literal results)
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-rows: 3
-- why: A CASE whose every result is a literal is a deterministic function of one record, so
--      GROUP BY it is a partitioning function (each visit gets exactly one band; with ELSE even a
--      NULL age does), and its values are fixed by the query text: a public domain, no partition
--      selection. Three groups, one group's cost: ε = 1.
SELECT CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END AS band,
       COUNT(*) AS n
FROM visits GROUP BY band ORDER BY band;

-- title: Total cost per year
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: CASE WHEN visit_date < CAST('2024-01-01' AS DATE) THEN 2023 ELSE 2024 END
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: A CASE key over a date, with integer literal results: again a partition with public
--      values {2023, 2024}. It is a different partition from the age bands, so a visit is in a
--      group of each: the session pays both (1 + 1).
SELECT CASE WHEN visit_date < DATE '2024-01-01' THEN 2023 ELSE 2024 END AS yr,
       SUM(cost) AS total_cost
FROM visits GROUP BY yr ORDER BY yr;

-- title: Children only
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- why: WHERE age < 18 is exactly the 'child' band. The analyzer does not look inside the CASE
--      key (an opaque partition: any record may fall in any group), but a child is in one band
--      and one year anyway, so it pays 1 + 1 + 0.5: the total grows by 0.5.
SELECT COUNT(*) AS n FROM visits WHERE age < 18;

-- title: Day cases vs inpatients (CASE without ELSE: NULL is a group)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: CASE WHEN length_of_stay = 0 THEN 'day case' WHEN length_of_stay >= 1 THEN 'inpatient' END
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=3.0
-- expect-rows: 3
-- oracle: SELECT kind, SUM(n) AS n FROM (
--      SELECT CASE WHEN length_of_stay = 0 THEN 'day case' WHEN length_of_stay >= 1
--      THEN 'inpatient' END AS kind, COUNT(*) AS n FROM visits GROUP BY kind
--      UNION ALL SELECT NULL, 0) GROUP BY kind ORDER BY kind
-- why: Without ELSE a CASE yields NULL for records matching no branch (here: a NULL
--      length_of_stay), so its public domain is {'day case', 'inpatient', NULL} and all three
--      groups are released (the NULL group is a noisy 0 on this data). Still a partition: ε.
SELECT CASE WHEN length_of_stay = 0 THEN 'day case' WHEN length_of_stay >= 1 THEN 'inpatient' END
         AS kind,
       COUNT(*) AS n
FROM visits GROUP BY kind ORDER BY kind;
