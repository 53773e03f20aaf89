-- title: Visits to hospitals A and B, grouped by hospital
-- dataset: demo
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-rows: 4
-- oracle: SELECT h.hospital, COUNT(v.hospital) AS n
--      FROM (VALUES ('A'), ('B'), ('C'), ('D')) h(hospital)
--      LEFT JOIN visits v ON v.hospital = h.hospital AND v.hospital IN ('A', 'B')
--      GROUP BY h.hospital ORDER BY h.hospital
-- why: Public group keys are always all released, C and D as noisy zeros: leaving them out
--      would depend on the data. The region is hospital ∈ {A, B}; the partition makes it one
--      group's cost.
SELECT hospital, COUNT(*) AS n FROM visits WHERE hospital IN ('A', 'B')
GROUP BY hospital ORDER BY hospital;

-- title: Visits to hospitals C and D (disjoint WHERE: free)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: hospital
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.0
-- expect-rows: 4
-- oracle: SELECT h.hospital, COUNT(v.hospital) AS n
--      FROM (VALUES ('A'), ('B'), ('C'), ('D')) h(hospital)
--      LEFT JOIN visits v ON v.hospital = h.hospital AND v.hospital IN ('C', 'D')
--      GROUP BY h.hospital ORDER BY h.hospital
-- why: The WHERE regions {A, B} and {C, D} are disjoint, so no visit is in both queries: the
--      second is free, although both release all four groups (the A and B counts here are
--      noisy zeros that depend on no record).
SELECT hospital, COUNT(*) AS n FROM visits WHERE hospital IN ('C', 'D')
GROUP BY hospital ORDER BY hospital;

-- title: Bed-days per department in hospital C (overlaps the second query)
-- budget: epsilon=1.0
-- expect-mechanisms: 1
-- expect-partition: department
-- expect-query-cost: epsilon=1.0
-- expect-marginal: epsilon=1.0
-- expect-total: epsilon=2.0
-- why: A visit to C is in the second query's region and in this one's: 1 + 1.
SELECT department, SUM(length_of_stay) AS bed_days FROM visits WHERE hospital = 'C'
GROUP BY department ORDER BY department;
