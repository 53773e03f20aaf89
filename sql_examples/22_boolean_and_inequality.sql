-- title: Insured visits
-- dataset: demo
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- why: Region insured = TRUE.
SELECT COUNT(*) AS n FROM visits WHERE insured;

-- title: insured IS NOT TRUE: FALSE or NULL (disjoint: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=0.5
-- why: IS NOT TRUE never yields NULL: it is TRUE exactly where insured is FALSE or NULL, the
--      complement of the first region. Disjoint, free.
SELECT COUNT(*) AS n FROM visits WHERE insured IS NOT TRUE;

-- title: NOT insured lies inside IS NOT TRUE (pays)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=1.0
-- why: NOT insured is TRUE only where insured is FALSE — inside the second region: an uninsured
--      visit pays 0.5 + 0.5.
SELECT COUNT(*) AS n FROM visits WHERE NOT insured;

-- title: Every hospital but A (<>)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=1.5
-- why: hospital <> 'A' (NULL excluded) overlaps the uninsured visits: 0.5 + 0.5 + 0.5.
SELECT COUNT(*) AS n FROM visits WHERE hospital <> 'A';

-- title: Hospital A with unknown insurance (fits in the slack: free)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0
-- expect-total: epsilon=1.5
-- why: hospital = 'A' AND insured IS NULL is outside insured, outside NOT insured (NULL) and
--      outside hospital <> 'A': only the IS NOT TRUE query saw these visits (0.5), so 0.5 more
--      keeps them at 1.0, below the session's 1.5.
SELECT COUNT(*) AS n FROM visits WHERE hospital = 'A' AND insured IS NULL;

-- title: Ages 17 and 18 (IN on an integer column)
-- budget: epsilon=0.5
-- expect-mechanisms: 1
-- expect-partition: none
-- expect-query-cost: epsilon=0.5
-- expect-marginal: epsilon=0.5
-- expect-total: epsilon=2.0
-- why: An uninsured 17-year-old at hospital B was at 1.5 and is in this region too: 2.0.
SELECT COUNT(*) AS n FROM visits WHERE age IN (17, 18);
