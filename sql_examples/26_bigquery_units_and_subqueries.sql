-- title: BigQuery AVG with a privacy unit: the average of the patients' averages
-- dataset: patients
-- budget: in-query
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- oracle: SELECT AVG(LEAST(GREATEST(a, 18), 90)) AS mean_age
--           FROM (SELECT patient_id, AVG(age) AS a FROM visits GROUP BY patient_id) AS p
-- why: In BigQuery, AVG in a DIFFERENTIAL_PRIVACY query with a privacy unit averages each
--      unit's own average (clamped to contribution_bounds_per_group), not the rows. privplan
--      computes it the same way: one derived row per patient (AVG(age) of their kept visits,
--      in [0, 100] by the policy, clamped to [18, 90]), then a noisy sum and a noisy count of
--      the derived rows, ε/2 each. age is constant per patient, so the answer does not depend
--      on which 10 visits a patient keeps.
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, privacy_unit_column=patient_id)
  AVG(age, contribution_bounds_per_group => (18, 90)) AS mean_age
FROM visits;

-- title: BigQuery COUNT(*) with contribution bounds: at most 5 visits per patient
-- budget: in-query
-- expect-mechanisms: 1
-- expect-partition: sex
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- oracle: SELECT sex, SUM(LEAST(n, 5)) AS visits
--           FROM (SELECT patient_id, sex, COUNT(*) AS n FROM visits GROUP BY patient_id, sex)
--           AS p GROUP BY sex ORDER BY sex
-- why: contribution_bounds_per_group bounds a unit's count in a group: each patient's visits
--      (at most the 10 the policy keeps) count up to 5. sex is constant per patient, so a
--      patient is in one group: the sum of the per-patient counts has sensitivity 5 instead
--      of 10, and the groups are disjoint. A derived table of its own: its cost adds.
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, privacy_unit_column=patient_id)
  sex, COUNT(*, contribution_bounds_per_group => (0, 5)) AS visits
FROM visits GROUP BY sex ORDER BY sex;

-- title: A UNION ALL of two BigQuery DP queries, each with its own budget
-- budget: in-query
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.5
-- oracle: SELECT 'children' AS band, SUM(LEAST(n, 10)) AS visits FROM (SELECT patient_id,
--           COUNT(*) AS n FROM visits WHERE age < 18 GROUP BY patient_id) AS c
--         UNION ALL SELECT 'seniors' AS band, SUM(LEAST(n, 10)) AS visits FROM (SELECT
--           patient_id, COUNT(*) AS n FROM visits WHERE age >= 65 GROUP BY patient_id) AS s
-- why: In BigQuery each SELECT of a UNION ALL is a DP query with its own OPTIONS. privplan
--      answers each branch on its own (charged, noised) and unions the noisy answers (free
--      post-processing). The two branches cost ε = 0.5 each, but age is constant per patient,
--      so a patient is a child or a senior, never both: the general theorem charges their
--      maximum, 0.5, not their sum.
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, privacy_unit_column=patient_id)
  'children' AS band, COUNT(*) AS visits FROM visits WHERE age < 18
UNION ALL
SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, privacy_unit_column=patient_id)
  'seniors' AS band, COUNT(*) AS visits FROM visits WHERE age >= 65;

-- title: A ratio of two DP subqueries (the budget shared between them)
-- budget: epsilon=1.0
-- expect-mechanisms: 2
-- expect-partition: none
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=3.5
-- oracle: SELECT a.n * 1.0 / b.n AS senior_share
--           FROM (SELECT COUNT(DISTINCT patient_id) AS n FROM visits WHERE age >= 65) AS a,
--                (SELECT COUNT(DISTINCT patient_id) AS n FROM visits) AS b
-- why: Each parenthesised DP query is answered on its own with half the statement's budget
--      (sequential composition: the halves add up to it), and the outer query divides their
--      noisy answers (free). Each counts one derived row per patient, from different inner
--      queries, so they are two derived tables and their costs add: ε = 1.
SELECT a.n * 1.0 / b.n AS senior_share
FROM (SELECT COUNT(*) AS n FROM (SELECT patient_id FROM visits WHERE age >= 65
                                 GROUP BY patient_id) AS p) AS a,
     (SELECT COUNT(*) AS n FROM (SELECT patient_id FROM visits GROUP BY patient_id) AS p) AS b;
