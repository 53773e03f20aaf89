-- title: SUM, AVG and VARIANCE over the DISTINCT lengths of stay
-- dataset: patients
-- session-budget: ApproxDP(10, 1e-5)
-- budget: epsilon=1.0
-- expect-mechanisms: 3
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- oracle: SELECT SUM(DISTINCT c) AS s, AVG(DISTINCT c) AS a, VAR_POP(DISTINCT c) AS v
--           FROM (SELECT LEAST(length_of_stay, 30) AS c FROM visits) AS v
-- why: Each aggregate of the DISTINCT values of a bounded column is computed from the distinct
--      values on its grid: SUM(DISTINCT g), COUNT(DISTINCT g) and the sum of the distinct g².
--      One row adds or removes at most one distinct value, so each is as sensitive as its plain
--      version per row, and a patient's (up to 10) rows move it by at most 10 times that.
--      Values are clamped to the policy's bounds [0, 30] first (the oracle does the same).
SELECT SUM(DISTINCT length_of_stay) AS s, AVG(DISTINCT length_of_stay) AS a,
       VAR_POP(DISTINCT length_of_stay) AS v
FROM visits;

-- title: Keys listed by the query: an integer range, released zero-filled without δ
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: age
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-rows: 3
-- oracle: SELECT a.age, COUNT(v.age) AS patients FROM (VALUES (101), (102), (103)) AS a(age)
--           LEFT JOIN visits AS v ON v.age = a.age GROUP BY a.age ORDER BY a.age
-- why: `age IN (101, 102, 103)` (kept by the analysis as the interval [101, 103]) names the
--      only keys the query can release: they come from the query text, not the data, so they
--      need no partition selection and are released even when empty (here every one: ages
--      stop at 100). No δ is spent.
SELECT age, COUNT(*) AS patients FROM visits WHERE age IN (101, 102, 103)
GROUP BY age ORDER BY age;

-- title: BigQuery's public groups: a RIGHT OUTER JOIN with a literal list
-- budget: in-query
-- expect-mechanisms: 1
-- expect-partition: age
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0.0
-- expect-rows: 3
-- oracle: SELECT a.age, SUM(LEAST(COALESCE(v.n, 0), 10)) AS visits
--           FROM (VALUES (17), (18), (120)) AS a(age) LEFT JOIN (SELECT patient_id, age,
--           COUNT(*) AS n FROM visits GROUP BY patient_id, age) AS v ON v.age = a.age
--           GROUP BY a.age ORDER BY a.age
-- why: BigQuery releases exactly the groups joined in (17, 18, and 120, which no patient
--      has: a noisy 0) and no other. privplan reads it as `WHERE age IN (17, 18, 120)`: the
--      same release and the same mechanisms, the keys a domain set by the query text (on a
--      column with declared public_values too: exactly the groups joined in, as in BigQuery).
--      It adds nothing to the session: age is constant per patient, so no patient is both in
--      this query's ages and in the previous query's (101-103), and the worst patient still
--      pays what it paid before (the general theorem: disjoint inputs compose in parallel).
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, privacy_unit_column=patient_id,
    group_selection_strategy=PUBLIC_GROUPS)
  age, COUNT(*) AS visits
FROM visits
RIGHT OUTER JOIN (SELECT DISTINCT age FROM UNNEST([17, 18, 120])) USING (age)
GROUP BY age ORDER BY age;

-- title: BigQuery's max_rows_contributed: two visits per patient in this query
-- budget: in-query
-- expect-mechanisms: 1
-- expect-partition: department
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-rows: 5
-- oracle: SELECT department, COUNT(*) AS visits FROM (SELECT department, ROW_NUMBER() OVER
--           (PARTITION BY patient_id ORDER BY ((((((((((((((((((CAST(468031668 AS BIGINT) +
--           COALESCE(CAST((visit_id) % 2147483647 AS BIGINT) + 2147483648, 0)) % 2147483647) *
--           1103515245 + COALESCE(CAST((patient_id) % 2147483647 AS BIGINT) + 2147483648, 0)) %
--           2147483647) * 1103515245 + COALESCE(CAST((length(hospital)) % 2147483647 AS BIGINT)
--           + 2147483648, 0)) % 2147483647) * 1103515245 + COALESCE(CAST((length(department)) %
--           2147483647 AS BIGINT) + 2147483648, 0)) % 2147483647) * 1103515245 +
--           COALESCE(CAST((date_diff('day', DATE '1970-01-01', visit_date)) % 2147483647 AS
--           BIGINT) + 2147483648, 0)) % 2147483647) * 1103515245 + COALESCE(CAST((age) %
--           2147483647 AS BIGINT) + 2147483648, 0)) % 2147483647) * 1103515245 +
--           COALESCE(CAST((length(sex)) % 2147483647 AS BIGINT) + 2147483648, 0)) % 2147483647)
--           * 1103515245 + COALESCE(CAST((length_of_stay) % 2147483647 AS BIGINT) + 2147483648,
--           0)) % 2147483647) * 1103515245 + CASE WHEN insured THEN 2 WHEN NOT insured THEN 1
--           ELSE 0 END) % 2147483647), visit_id NULLS FIRST, patient_id NULLS FIRST, hospital
--           NULLS FIRST, department NULLS FIRST, visit_date NULLS FIRST, age NULLS FIRST, sex
--           NULLS FIRST, cost NULLS FIRST, length_of_stay NULLS FIRST, insured NULLS FIRST) AS r
--           FROM visits) AS v WHERE r <= 2 GROUP BY department ORDER BY department
-- why: max_rows_contributed=2 keeps at most 2 of each patient's visits for this query (the
--      first by the same row order the policy's 10-visit bound uses: an integer key over the
--      row's values, then every column), so a patient is in at
--      most 2 departments with at most 2 visits in each: the GROUP BY's noise is calibrated to
--      that, not to the policy's 10 visits. A value above the policy's bound is refused.
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, privacy_unit_column=patient_id,
    max_rows_contributed=2)
  department, COUNT(*) AS visits
FROM visits GROUP BY department ORDER BY department;

-- title: DISTINCT over released rows, and a WITH query over another WITH query, are free
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: sex
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-rows: 1
-- why: The inner WITH query is the DP query (one noisy count per sex); `r` reads only that
--      answer and the outer SELECT DISTINCT runs over r's rows: post-processing of noisy
--      values on the connection that holds nothing else, so it costs nothing more.
WITH q AS (SELECT sex, COUNT(*) AS n FROM visits GROUP BY sex),
     r AS (SELECT n > 0 AS seen FROM q)
SELECT DISTINCT seen FROM r;
